package dataplane_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/otlptest"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
	"github.com/weftmesh/weft/mesh/dataplane/tracing/otlpexport"
)

const (
	traceW3C = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceB3  = "80f198ee56343ba864fe8b2a57d3eff7"
	traceOff = "11111111111111111111111111111111"
	callerA  = "00f067aa0ba902b7" // the application's span, the client proxy's parent
	callerB  = "e457b5a2e4d86bd1"
)

// tracedPair is client proxy A -> mesh TLS -> server proxy B -> app, each
// proxy exporting to its own tracer and both to one collector.
type tracedPair struct {
	*httpPair
	trA, trB *otlpexport.Tracer
}

func startTracedPair(t *testing.T, collector string, o httpPairOptions) *tracedPair {
	t.Helper()
	tp := &tracedPair{}
	newTracer := func(pod string) *otlpexport.Tracer {
		tr, err := otlpexport.New(testutil.Context(t, 0), tracing.Config{CollectorAddr: collector, ServiceName: pod + "-proxy", Pod: pod, Namespace: "shop"},
			otlpexport.WithExportTimeout(2*time.Second), otlpexport.WithRetryFor(0))
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tr.Shutdown(ctx)
		})
		return tr
	}
	tp.trA, tp.trB = newTracer("client"), newTracer("server")
	o.optsA = append(o.optsA, dataplane.WithTracer(tp.trA))
	o.optsB = append(o.optsB, dataplane.WithTracer(tp.trB))
	tp.httpPair = startHTTPPair(t, o)
	return tp
}

// finish stops both proxies (their handlers, and so their spans, have all
// ended when Run returns) and flushes both tracers: afterwards the
// collector holds every span the pair will ever export.
func (tp *tracedPair) finish(t *testing.T) {
	t.Helper()
	tp.a.stop(t)
	tp.b.stop(t)
	ctx := testutil.Context(t, 0)
	require.NoError(t, tp.trA.Shutdown(ctx))
	require.NoError(t, tp.trB.Shutdown(ctx))
}

// spansOf returns the collector's spans of one trace by the service that
// sent them.
func spansOf(spans []otlptest.Span, traceID string) map[string][]otlptest.Span {
	out := map[string][]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID() == traceID {
			out[s.Resource["service.name"]] = append(out[s.Resource["service.name"]], s)
		}
	}
	return out
}

func TestATraceCrossesTwoProxiesWithParentAndChildIntact(t *testing.T) {
	col := otlptest.Start(t)
	tp := startTracedPair(t, col.Addr(), httpPairOptions{})
	h1, h2 := h1Client(), h2cClient()

	// 1. W3C, sampled, HTTP/1.1 from the application.
	resp, _ := get(t, h1, tp.url("/headers"), "traceparent", "00-"+traceW3C+"-"+callerA+"-01", "tracestate", "vendor=abc")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	seenW3C := tp.app.last().Header

	// 2. W3C, not sampled: no spans, but the context still goes on.
	resp, _ = get(t, h1, tp.url("/headers"), "traceparent", "00-"+traceOff+"-"+callerA+"-00")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	seenOff := tp.app.last().Header

	// 3. B3 multiple headers, sampled, over HTTP/2, answered 503 by the
	// application.
	resp, _ = get(t, h2, tp.url("/status/503"), "X-B3-TraceId", traceB3, "X-B3-SpanId", callerB, "X-B3-Sampled", "1")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	seenB3 := tp.app.last().Header

	// 4. No context: not traced, nothing added.
	resp, _ = get(t, h1, tp.url("/headers"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	seenNone := tp.app.last().Header

	tp.finish(t)
	spans := col.Spans()
	require.Len(t, spans, 4, "two spans for each sampled request, none for the others: %v", spans)

	// The W3C trace: client span under the application's span, server
	// span under the client span, application under the server span.
	w3c := spansOf(spans, traceW3C)
	require.Len(t, w3c["client-proxy"], 1)
	require.Len(t, w3c["server-proxy"], 1)
	client, server := w3c["client-proxy"][0], w3c["server-proxy"][0]
	assert.Equal(t, callerA, client.ParentID(), "the client proxy's span is a child of the caller's")
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, client.GetKind())
	assert.Equal(t, client.SpanID(), server.ParentID(), "the server proxy's span is a child of the client proxy's")
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, server.GetKind())
	assert.Equal(t, []string{"00-" + traceW3C + "-" + server.SpanID() + "-01"}, seenW3C["Traceparent"],
		"the application sees the server proxy's span as its parent")
	assert.Equal(t, []string{"vendor=abc"}, seenW3C["Tracestate"])
	for _, s := range []otlptest.Span{client, server} {
		assert.Equal(t, "GET /headers", s.GetName())
		assert.Equal(t, "200", s.Attr("http.response.status_code"))
		assert.Equal(t, "/headers", s.Attr("url.path"))
		assert.Equal(t, "shop", s.Resource["k8s.namespace.name"])
		assert.True(t, s.GetEndTimeUnixNano() >= s.GetStartTimeUnixNano())
	}
	assert.Equal(t, "outbound", client.Attr("weft.direction"))
	assert.Equal(t, "inbound", server.Attr("weft.direction"))
	assert.Equal(t, "client", client.Resource["k8s.pod.name"])
	assert.Equal(t, "server", server.Resource["k8s.pod.name"])

	// The unsampled trace went on with new span ids and no decision
	// changed.
	off := seenOff["Traceparent"]
	require.Len(t, off, 1)
	assert.True(t, strings.HasPrefix(off[0], "00-"+traceOff+"-"), off[0])
	assert.True(t, strings.HasSuffix(off[0], "-00"), off[0])
	assert.NotContains(t, off[0], callerA, "the proxies' own span ids replace the caller's")

	// The B3 trace, in B3 headers.
	b3 := spansOf(spans, traceB3)
	require.Len(t, b3["client-proxy"], 1)
	require.Len(t, b3["server-proxy"], 1)
	bc, bs := b3["client-proxy"][0], b3["server-proxy"][0]
	assert.Equal(t, callerB, bc.ParentID())
	assert.Equal(t, bc.SpanID(), bs.ParentID())
	assert.Equal(t, []string{traceB3}, seenB3["X-B3-Traceid"])
	assert.Equal(t, []string{bs.SpanID()}, seenB3["X-B3-Spanid"])
	assert.Equal(t, []string{bc.SpanID()}, seenB3["X-B3-Parentspanid"])
	assert.Equal(t, []string{"1"}, seenB3["X-B3-Sampled"])
	assert.Empty(t, seenB3["Traceparent"], "the proxy answers in the format it was asked in")
	assert.Equal(t, "2", bc.Attr("network.protocol.version"))
	for _, s := range []otlptest.Span{bc, bs} {
		assert.Equal(t, "503", s.Attr("http.response.status_code"))
		assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, s.GetStatus().GetCode())
	}

	for _, k := range []string{"Traceparent", "B3", "X-B3-Traceid", "X-B3-Spanid"} {
		assert.Empty(t, seenNone[k], "a request without a context gets none: %s", k)
	}
}

// The proxy answers for itself (here: no endpoint reachable) inside its
// span, which records why.
func TestAnAnswerTheProxyMakesItselfEndsItsSpanWithTheErrorClass(t *testing.T) {
	col := otlptest.Start(t)
	tp := startTracedPair(t, col.Addr(), httpPairOptions{serverPolicy: allowOnly(idC)}) // B refuses A
	resp, _ := get(t, h1Client(), tp.url("/"), "traceparent", "00-"+traceW3C+"-"+callerA+"-01")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	tp.finish(t)
	byService := spansOf(col.Spans(), traceW3C)
	require.Len(t, byService["server-proxy"], 1)
	s := byService["server-proxy"][0]
	assert.Equal(t, "403", s.Attr("http.response.status_code"))
	assert.Equal(t, "unauthorized", s.Attr("error.type"))
	assert.Equal(t, tracepb.Status_STATUS_CODE_ERROR, s.GetStatus().GetCode())
	require.Len(t, byService["client-proxy"], 1)
	assert.Equal(t, "403", byService["client-proxy"][0].Attr("http.response.status_code"))
}

// A collector that is down, or that takes connections and never answers,
// costs spans and never a request: every traced request is answered.
func TestRequestsFlowWhileTheCollectorIsDownOrDeaf(t *testing.T) {
	closed := testutil.Listen(t)
	down := closed.Addr().String()
	require.NoError(t, closed.Close())
	deaf := testutil.Listen(t) // accepts (the kernel's backlog), never reads
	for name, addr := range map[string]string{"down": down, "deaf": deaf.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			tp := startTracedPair(t, addr, httpPairOptions{})
			c := h1Client()
			for i := 0; i < 50; i++ {
				resp, _ := get(t, c, tp.url("/"), "traceparent", "00-"+traceW3C+"-"+callerA+"-01")
				require.Equal(t, http.StatusOK, resp.StatusCode)
			}
			tp.a.stop(t)
			tp.b.stop(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tp.trA.Shutdown(ctx) // fails: nothing reaches a collector; it returns
			_ = tp.trB.Shutdown(ctx)
		})
	}
}

// A gRPC call is traced as any request, with its gRPC status.
func TestAGRPCCallThroughThePairIsTraced(t *testing.T) {
	col := otlptest.Start(t)
	seenMD := make(chan metadata.MD, 1)
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		seenMD <- md
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	t.Cleanup(gs.Stop)
	// The application's HTTP/2 (h2c) server serves gRPC.
	app := startHTTPApp(t, func(s *http.Server) { s.Handler = gs })
	tp := startTracedPair(t, col.Addr(), httpPairOptions{app: app})

	cc, err := grpc.NewClient("passthrough:///"+tp.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	ctx := metadata.AppendToOutgoingContext(testutil.Context(t, 0), "traceparent", "00-"+traceW3C+"-"+callerA+"-01")
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	seen := <-seenMD
	require.NoError(t, cc.Close())

	tp.finish(t)
	byService := spansOf(col.Spans(), traceW3C)
	require.Len(t, byService["client-proxy"], 1)
	require.Len(t, byService["server-proxy"], 1)
	client, server := byService["client-proxy"][0], byService["server-proxy"][0]
	assert.Equal(t, callerA, client.ParentID())
	assert.Equal(t, client.SpanID(), server.ParentID())
	for _, s := range []otlptest.Span{client, server} {
		assert.Equal(t, "POST /grpc.health.v1.Health/Check", s.GetName())
		assert.Equal(t, "0", s.Attr("rpc.grpc.status_code"))
		assert.Equal(t, "200", s.Attr("http.response.status_code"))
		assert.Equal(t, tracepb.Status_STATUS_CODE_UNSET, s.GetStatus().GetCode())
	}
	assert.Equal(t, []string{"00-" + traceW3C + "-" + server.SpanID() + "-01"}, seen.Get("traceparent"))
}
