package demo_test

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/mesh/local/demo"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestStatsReportRateSuccessAndPercentilesOverTheWindow(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	s := demo.NewStats(clk.now)
	for i := 1; i <= 100; i++ {
		s.Record("traffic", time.Duration(i)*time.Millisecond, demo.Success)
		clk.add(10 * time.Millisecond)
	}
	s.Record("intruder", time.Millisecond, demo.Denied)
	s.Record("intruder", time.Millisecond, demo.Failure)

	figs := s.Snapshot(time.Second)
	require.Len(t, figs, 2)
	tr := figs[0]
	assert.Equal(t, "traffic", tr.Workload)
	assert.Equal(t, int64(100), tr.Requests)
	assert.InDelta(t, 100, tr.RPS, 0.01, "100 requests in the first second")
	assert.Equal(t, 1.0, tr.SuccessRate)
	assert.Equal(t, 50*time.Millisecond, tr.P50)
	assert.Equal(t, 99*time.Millisecond, tr.P99)
	in := figs[1]
	assert.Equal(t, int64(1), in.Denied)
	assert.Equal(t, int64(1), in.Failed)
	assert.Equal(t, 0.0, in.SuccessRate)

	// After the window, the live figures drop and the totals stay.
	clk.add(demo.Window + time.Second)
	tr = s.Snapshot(time.Minute)[0]
	assert.Zero(t, tr.RPS)
	assert.Zero(t, tr.P50)
	assert.Equal(t, int64(100), tr.Succeeded)
	assert.Equal(t, 50*time.Millisecond, tr.TotalP50)
}

func counter(name string, v float64, labels ...string) *dto.MetricFamily {
	m := &dto.Metric{Counter: &dto.Counter{Value: proto.Float64(v)}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(labels[i]), Value: proto.String(labels[i+1])})
	}
	return &dto.MetricFamily{Name: proto.String(name), Metric: []*dto.Metric{m}}
}

func TestReadProxyCountsDecisionsAndVerifiedPeers(t *testing.T) {
	const web = "web.shop.serviceaccount.identity.weft.cluster.local"
	const bad = "bad.shop.serviceaccount.identity.weft.cluster.local"
	tcp := demo.ReadProxy("api", []*dto.MetricFamily{
		counter("inbound_tcp_authz_allow_total", 3, "client_id", web, "tls", "true"),
		counter("inbound_tcp_authz_allow_total", 2, "tls", "no_identity", "no_tls_reason", "no_tls_from_remote"),
		counter("inbound_tcp_authz_deny_total", 4, "client_id", bad, "tls", "true"),
		counter("tcp_open_total", 1, "direction", "outbound", "peer", "dst", "server_id", "db.shop.serviceaccount.identity.weft.cluster.local", "tls", "true"),
	})
	assert.Equal(t, 5.0, tcp.Allowed)
	assert.Equal(t, 4.0, tcp.Denied)
	assert.Equal(t, []string{web}, tcp.From, "only mutual-TLS peers are identities")
	assert.Equal(t, []string{bad}, tcp.DeniedFrom)
	assert.Equal(t, []string{"db.shop.serviceaccount.identity.weft.cluster.local"}, tcp.To)

	// With HTTP authorization the request counts win over connections.
	http := demo.ReadProxy("api", []*dto.MetricFamily{
		counter("inbound_tcp_authz_allow_total", 1, "client_id", web, "tls", "true"),
		counter("inbound_http_authz_allow_total", 40, "client_id", web, "tls", "true"),
		counter("inbound_http_authz_deny_total", 5, "client_id", bad, "tls", "true"),
		counter("inbound_http_route_not_found_total", 2, "client_id", bad, "tls", "true"),
	})
	assert.Equal(t, 40.0, http.Allowed)
	assert.Equal(t, 7.0, http.Denied)
	merged := tcp.Merge(http)
	assert.Equal(t, 45.0, merged.Allowed)
	assert.Equal(t, "web.shop", demo.ShortIdentity(web))
}

func TestRenderingShowsEveryWorkloadAndTheSummaryVerdict(t *testing.T) {
	const web = "web.shop.serviceaccount.identity.weft.cluster.local"
	f := demo.Frame{Elapsed: 3 * time.Second, Rows: []demo.Row{
		{Figures: demo.Figures{Workload: "web", Requests: 10, Succeeded: 10, RPS: 5, SuccessRate: 1, P50: time.Millisecond, P99: 2 * time.Millisecond}, Calls: []string{"api"}},
		{Figures: demo.Figures{Workload: "api", Requests: 10, Succeeded: 10}, Proxy: demo.ProxyFigures{Allowed: 10, Denied: 2, From: []string{web}, DeniedFrom: []string{"bad.shop.serviceaccount.identity.weft.cluster.local"}}},
		{Figures: demo.Figures{Workload: "bad", Requests: 2, Denied: 2}},
	}}
	lines := demo.RenderLines(f)
	assert.Equal(t, 3, strings.Count(lines, "\n"))
	assert.Contains(t, lines, `t=3.0s workload=api`)
	assert.Contains(t, lines, `peers="<-web.shop x-bad.shop"`)
	table := demo.RenderTable(f)
	assert.Contains(t, table, "WORKLOAD")
	assert.Contains(t, table, "10/2")

	sum := demo.NewSummary(f)
	assert.True(t, sum.OK())
	assert.Equal(t, int64(20), sum.Succeeded)
	out := demo.RenderSummary(sum)
	assert.Contains(t, out, "api's proxy accepted "+web)
	assert.Contains(t, out, "result: 20 requests succeeded over mutual TLS; 2 denied by policy")

	f.Rows = f.Rows[:1]
	assert.False(t, demo.NewSummary(f).OK())
	assert.Contains(t, demo.RenderSummary(demo.NewSummary(f)), "result: incomplete")
}

func TestRunRejectsABadConfig(t *testing.T) {
	_, err := demo.Run(t.Context(), demo.Config{})
	assert.Error(t, err)
	_, err = demo.Run(t.Context(), demo.Config{Out: io.Discard, Rate: 10000})
	assert.Error(t, err)
}
