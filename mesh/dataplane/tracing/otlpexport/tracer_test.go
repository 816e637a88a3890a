package otlpexport_test

import (
	"context"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/otlptest"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
	"github.com/weftmesh/weft/mesh/dataplane/tracing/otlpexport"
)

func parentOf(t *testing.T, traceparent string) trace.Context {
	t.Helper()
	c, ok := trace.ParseTraceparent(traceparent)
	require.True(t, ok, "valid traceparent")
	return c
}

func newTracer(t *testing.T, cfg tracing.Config, opts ...otlpexport.Option) *otlpexport.Tracer {
	t.Helper()
	tr, err := otlpexport.New(testutil.Context(t, 0), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr
}

func TestSampledSpanArrivesAtTheCollectorAsTheCallersChild(t *testing.T) {
	col := otlptest.Start(t)
	tr := newTracer(t, tracing.Config{
		CollectorAddr: col.Addr(), ServiceName: "web-proxy", Pod: "web-7d9f", Namespace: "shop",
		Attributes: map[string]string{"k8s.pod.ip": "10.0.0.7"},
	})
	parent := parentOf(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r := httptest.NewRequest("GET", "http://web.shop.svc.cluster.local:8080/items/17?color=red", nil)
	r.Header.Set("User-Agent", "curl/8")
	r.Header.Set("Authorization", "Bearer secret")
	sp := tr.Start(parent, trace.Server, r)
	require.True(t, sp.ID().IsValid())
	assert.NotEqual(t, parent.SpanID, sp.ID())
	sp.End(503, "", "")

	ctx := testutil.Context(t, 0)
	require.NoError(t, tr.ForceFlush(ctx))
	spans, err := col.WaitSpans(ctx, 1)
	require.NoError(t, err)
	require.Len(t, spans, 1)
	s := spans[0]
	assert.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", s.TraceID())
	assert.Equal(t, "00f067aa0ba902b7", s.ParentID(), "the caller's span is the parent")
	assert.Equal(t, sp.ID().String(), s.SpanID())
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, s.GetKind())
	assert.Equal(t, "GET /items/17", s.GetName())
	assert.Equal(t, "GET", s.Attr("http.request.method"))
	assert.Equal(t, "/items/17", s.Attr("url.path"))
	assert.Equal(t, "color=red", s.Attr("url.query"))
	assert.Equal(t, "web.shop.svc.cluster.local", s.Attr("server.address"))
	assert.Equal(t, "8080", s.Attr("server.port"))
	assert.Equal(t, "curl/8", s.Attr("user_agent.original"))
	assert.Equal(t, "503", s.Attr("http.response.status_code"))
	assert.Equal(t, "inbound", s.Attr("weft.direction"))
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, s.GetStatus().GetCode())
	for _, kv := range s.GetAttributes() {
		assert.NotContains(t, kv.GetValue().String(), "secret", "credentials are never recorded (%s)", kv.GetKey())
	}
	assert.Equal(t, "web-proxy", s.Resource["service.name"])
	assert.Equal(t, "web-7d9f", s.Resource["k8s.pod.name"])
	assert.Equal(t, "shop", s.Resource["k8s.namespace.name"])
	assert.Equal(t, "10.0.0.7", s.Resource["k8s.pod.ip"])
	assert.NotEmpty(t, s.Resource["process.pid"])
}

func TestUnsampledSpanGetsAnIDButIsNeverExported(t *testing.T) {
	col := otlptest.Start(t)
	tr := newTracer(t, tracing.Config{CollectorAddr: col.Addr()})
	r := httptest.NewRequest("POST", "http://api:80/grpc.Service/Call", nil)

	unsampled := parentOf(t, "00-11111111111111111111111111111111-1111111111111111-00")
	sp := tr.Start(unsampled, trace.Client, r)
	require.True(t, sp.ID().IsValid(), "an unsampled span still has an id to send on")
	assert.NotEqual(t, unsampled.SpanID, sp.ID())
	sp.End(200, "0", "")

	sampled := parentOf(t, "00-22222222222222222222222222222222-2222222222222222-01")
	sp2 := tr.Start(sampled, trace.Client, r)
	sp2.End(200, "14", "")

	// Both spans have ended; the flush exports whatever was recorded.
	ctx := testutil.Context(t, 0)
	require.NoError(t, tr.ForceFlush(ctx))
	spans, err := col.WaitSpans(ctx, 1)
	require.NoError(t, err)
	require.Len(t, spans, 1, "only the sampled span")
	assert.Equal(t, "22222222222222222222222222222222", spans[0].TraceID())
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, spans[0].GetKind())
	assert.Equal(t, "14", spans[0].Attr("rpc.grpc.status_code"))
	assert.Equal(t, "outbound", spans[0].Attr("weft.direction"))
}

func TestNewRefusesABadCollectorAddress(t *testing.T) {
	for _, addr := range []string{"", "collector", "collector:0", "http://collector:4317"} {
		_, err := otlpexport.New(testutil.Context(t, 0), tracing.Config{CollectorAddr: addr})
		require.Error(t, err, addr)
		assert.Contains(t, err.Error(), "otlpexport: ")
	}
}

// A collector that is down, or that accepts connections and never
// answers, costs spans and never a caller's time: Start and End return
// whatever the exporter is doing (the batch processor drops what its
// queue cannot hold), and Shutdown returns within its context.
func TestAnUnreachableCollectorNeverHoldsUpSpans(t *testing.T) {
	closed := testutil.Listen(t)
	downAddr := closed.Addr().String()
	require.NoError(t, closed.Close())

	deaf := testutil.Listen(t)
	var held sync.WaitGroup
	var heldMu sync.Mutex
	var conns []net.Conn
	held.Add(1)
	go func() {
		defer held.Done()
		for {
			c, err := deaf.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			conns = append(conns, c) // never read, never answered
			heldMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		deaf.Close()
		held.Wait()
		heldMu.Lock()
		for _, c := range conns {
			c.Close()
		}
		heldMu.Unlock()
	})

	for name, addr := range map[string]string{"down": downAddr, "deaf": deaf.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			tr, err := otlpexport.New(testutil.Context(t, 0), tracing.Config{CollectorAddr: addr, MaxQueueSize: 16},
				otlpexport.WithBatchTimeout(time.Millisecond), otlpexport.WithExportTimeout(200*time.Millisecond), otlpexport.WithRetryFor(0))
			require.NoError(t, err)
			r := httptest.NewRequest("GET", "http://web:80/", nil)
			parent := parentOf(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Far more spans than the queue holds.
				for i := 0; i < 5000; i++ {
					tr.Start(parent, trace.Server, r).End(200, "", "")
				}
			}()
			select {
			case <-done:
			case <-testutil.Context(t, 30*time.Second).Done():
				t.Fatal("ending spans blocked on the exporter")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			first := tr.Shutdown(ctx) // may fail (nothing reaches the collector); it must return
			assert.Equal(t, first, tr.Shutdown(ctx), "Shutdown is idempotent")
		})
	}
}
