package policy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

// histogram and gauge record what they are given.
type histogram struct {
	mu  sync.Mutex
	obs []float64
}

func (h *histogram) With(...string) metrics.Histogram { return h }
func (h *histogram) Observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs = append(h.obs, v)
}
func (h *histogram) values() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]float64(nil), h.obs...)
}

type gauge struct {
	mu sync.Mutex
	v  float64
}

func (g *gauge) With(...string) metrics.Gauge { return g }
func (g *gauge) Set(v float64)                { g.mu.Lock(); g.v = v; g.mu.Unlock() }
func (g *gauge) Add(d float64)                { g.mu.Lock(); g.v += d; g.mu.Unlock() }
func (g *gauge) value() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.v
}

func TestIndexerReportsBuildSecondsByItsClockAndCountsOpenWatchStreams(t *testing.T) {
	rebuild, streams := &histogram{}, &gauge{}
	clock := testutil.NewStepClock(time.Unix(1_700_000_000, 0), 250*time.Millisecond)

	src := policy.NewMemorySource(objectsFrom(t, seedDoc(true)))
	x, err := policy.NewIndexer(context.Background(), src, policy.WithMetrics(policy.Metrics{RebuildSeconds: rebuild, Streams: streams}), policy.WithClock(clock.Now))
	require.NoError(t, err)
	// The first build reads the clock twice: 250ms apart.
	assert.Equal(t, []float64{0.25}, rebuild.values())
	x.Rebuild()
	assert.Equal(t, []float64{0.25, 0.25}, rebuild.values())

	is, err := policy.NewInboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	is.Register(gs)
	l := testutil.Listen(t)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(l) }()
	defer func() { gs.Stop(); <-served }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()

	ctx := testutil.Context(t, 10*time.Second)
	wctx, cancel := context.WithCancel(ctx)
	st, err := inbound.NewInboundServerPoliciesClient(conn).WatchPort(wctx, &inbound.PortSpec{Workload: "my-app:web-0", Port: 8080})
	require.NoError(t, err)
	_, err = st.Recv()
	require.NoError(t, err)
	// The server counts the stream before it sends the first policy.
	assert.Equal(t, 1.0, streams.value())
	cancel()
	testutil.Eventually(t, 10*time.Second, func() bool { return streams.value() == 0 }, "the gauge drops when the stream ends")
}

// docs/policy.md lists these series: a renamed series or label must fail
// here.
func TestPrometheusMetricsKeepTheirDocumentedNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := policy.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	m.RebuildSeconds.Observe(0.01)
	m.Streams.Add(1)
	assert.Equal(t, map[string]string{
		"weft_policy_index_rebuild_seconds": "histogram{}",
		"weft_policy_watch_streams":         "gauge{}",
	}, testutil.MetricShapes(t, reg))
}

func TestWithMetricsTakesAPartialSet(t *testing.T) {
	streams := &gauge{}
	x, err := policy.NewIndexer(context.Background(), policy.NewMemorySource(objectsFrom(t, seedDoc(true))), policy.WithMetrics(policy.Metrics{Streams: streams}))
	require.NoError(t, err, "the build is observed by a discarding histogram")
	x.Rebuild()
	assert.Zero(t, streams.value())
}
