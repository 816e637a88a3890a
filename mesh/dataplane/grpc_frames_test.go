package dataplane_test

import (
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/prototext"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/grpcoracle"
	"github.com/weftmesh/weft/mesh/dataplane"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"net"
)

// startRecordingTestService serves grpc-go's interop test service over
// h2c, recording the metadata of every call.
func startRecordingTestService(t *testing.T) (*httpApp, *grpcoracle.Seen) {
	ln := testutil.Listen(t)
	return &httpApp{ln: ln}, grpcoracle.Serve(t, ln)
}

// testServiceCalls makes grpcoracle's calls through the proxy pair at
// addr, the unary one with mesh metadata of the caller's own (which
// must not reach the application).
func testServiceCalls(t *testing.T, addr string) map[string]grpcoracle.Result {
	return grpcoracle.Calls(t, addr, []string{"l5d-client-id", "admin.forged", "weft-anything", "forged"})
}

// tapEvents reads n calls' events from a tap, without what differs from
// one pair to the other or from run to run (stream ids, the source's
// address, the authority the caller dialled, durations and the deadline
// left) and without the content-length of a response head (see
// withoutContentLength).
func tapEvents(t *testing.T, tap ptap.Tap_ObserveClient) []string {
	t.Helper()
	return tapEventsOf(t, tap, true)
}

// tapEventsOf is tapEvents, keeping the content-length of response heads
// unless dropLength.
func tapEventsOf(t *testing.T, tap ptap.Tap_ObserveClient, dropLength bool) []string {
	t.Helper()
	var out []string
	for {
		ev, err := tap.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		ev.Source = nil
		switch e := ev.GetHttp().GetEvent().(type) {
		case *ptap.TapEvent_Http_RequestInit_:
			e.RequestInit.Id, e.RequestInit.Authority = nil, ""
			hs := e.RequestInit.GetHeaders().GetHeaders()[:0]
			for _, h := range e.RequestInit.GetHeaders().GetHeaders() {
				if h.GetName() != ":authority" && h.GetName() != "grpc-timeout" {
					hs = append(hs, h)
				}
			}
			e.RequestInit.GetHeaders().Headers = hs
		case *ptap.TapEvent_Http_ResponseInit_:
			e.ResponseInit.Id, e.ResponseInit.SinceRequestInit = nil, nil
			hs := e.ResponseInit.GetHeaders().GetHeaders()[:0]
			for _, h := range e.ResponseInit.GetHeaders().GetHeaders() {
				if !dropLength || h.GetName() != "content-length" {
					hs = append(hs, h)
				}
			}
			if e.ResponseInit.GetHeaders() != nil {
				e.ResponseInit.GetHeaders().Headers = hs
			}
		case *ptap.TapEvent_Http_ResponseEnd_:
			e.ResponseEnd.Id, e.ResponseEnd.SinceRequestInit, e.ResponseEnd.SinceResponseInit = nil, nil, nil
		}
		out = append(out, prototext.Format(ev))
	}
}

// TestGRPCCallsGetTheSameThroughTheFramePathAsThroughTheHTTPPath is the
// differential oracle of the frame path: the same gRPC calls through two
// proxy pairs, both proxies of one on the frame path (counted: every
// call takes it, outbound on the client proxy and inbound on the server
// proxy) and of the other on the http path, must give the caller the
// same header, messages, trailers and status, the application the same
// metadata (l5d-client-id the client proxy's verified identity, no mesh
// metadata of the caller's), the taps of both proxies the same events,
// and both proxies' series the same counts.
func TestGRPCCallsGetTheSameThroughTheFramePathAsThroughTheHTTPPath(t *testing.T) {
	app, seen := startRecordingTestService(t)
	var frames, outFrames atomic.Int64
	viaHTTP := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), app: app, cfgA: tapConfig, cfgB: tapConfig,
		optsA: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()},
		optsB: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()}})
	viaFrames := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), app: app, cfgA: tapConfig, cfgB: tapConfig,
		optsA: []dataplane.Option{dataplane.WithGRPCOutFrameCountForTest(&outFrames)},
		optsB: []dataplane.Option{dataplane.WithGRPCFrameCountForTest(&frames)}})

	const calls = 6
	observe := func(hp *httpPair, l net.Listener, id string, r *running) ptap.Tap_ObserveClient {
		return openTap(t, tapConn(t, hp.pki, idTapper, l, id), r,
			&ptap.ObserveRequest{Limit: calls, Match: pathPrefix("/grpc.testing.TestService/"), Extract: withHeaders()}, 1)
	}
	tapHTTP, tapFrames := observe(viaHTTP, viaHTTP.tapB, idB, viaHTTP.b), observe(viaFrames, viaFrames.tapB, idB, viaFrames.b)
	tapOutHTTP, tapOutFrames := observe(viaHTTP, viaHTTP.tapA, idA, viaHTTP.a), observe(viaFrames, viaFrames.tapA, idA, viaFrames.a)

	want := testServiceCalls(t, viaHTTP.clientAddr)
	seenHTTP := seen.Take()
	require.Zero(t, frames.Load())
	require.Zero(t, outFrames.Load())
	got := testServiceCalls(t, viaFrames.clientAddr)
	seenFrames := seen.Take()
	assert.Equal(t, int64(calls), frames.Load(), "every call took the server proxy's frame path")
	assert.Equal(t, int64(calls), outFrames.Load(), "every call took the client proxy's frame path")

	// The calls did what they are for (the oracle is not two empty maps).
	require.Len(t, want, calls)
	assert.Equal(t, codes.OK, want["unary"].Code)
	assert.Equal(t, []string{"first"}, want["unary"].Header.Get("x-grpc-test-echo-initial"))
	assert.Equal(t, []string{"\x00\x01\xff"}, want["unary"].Trailer.Get("x-grpc-test-echo-trailing-bin"))
	assert.Equal(t, codes.FailedPrecondition, want["error"].Code)
	assert.Equal(t, codes.Unimplemented, want["unknown"].Code)
	assert.Len(t, want["server-stream"].Responses, 3)
	assert.Len(t, want["bidi"].Responses, 3)
	assert.Equal(t, []string{"a", "b"}, seenHTTP["unary"].Get("x-extra"))
	assert.Equal(t, []string{idA}, seenHTTP["unary"].Get("l5d-client-id"))

	// The one difference: the http path's ResponseWriter adds a
	// content-length when it holds the whole body as the handler returns
	// (a unary response, a trailers-only answer); the frame path sends
	// the fields as they are.
	assert.Equal(t, []string{"0"}, want["error"].Trailer.Get("content-length"))
	assert.Empty(t, got["error"].Trailer.Get("content-length"))
	withoutContentLength(want)
	withoutContentLength(got)
	for name, w := range want {
		assert.Equal(t, w, got[name], "call %s: the caller's view", name)
	}
	for _, v := range []struct {
		seen map[string]metadata.MD
		hp   *httpPair
	}{{seenHTTP, viaHTTP}, {seenFrames, viaFrames}} {
		for name, md := range v.seen {
			assert.Equal(t, []string{v.hp.clientAddr}, md.Get(":authority"), name) // the pair's own
			delete(md, ":authority")
		}
	}
	assert.Equal(t, seenHTTP, seenFrames, "the application's view")
	for name, md := range seenFrames {
		for k := range md {
			if k != "l5d-client-id" {
				assert.NotRegexp(t, "^(l5d|weft)-", k, "call %s: a mesh field reached the application", name)
			}
		}
	}

	assert.Equal(t, tapEvents(t, tapHTTP), tapEvents(t, tapFrames), "the inbound tap's events")
	outHTTP := tapEvents(t, tapOutHTTP)
	require.Len(t, outHTTP, 3*calls, "request, response head and end of each call")
	assert.Equal(t, outHTTP, tapEvents(t, tapOutFrames), "the outbound tap's events")
	for _, labels := range [][]string{
		{"request_total", `direction="inbound"`},
		{"response_total", `direction="inbound"`, `classification="success"`, `grpc_status="0"`},
		{"response_total", `direction="inbound"`, `classification="failure"`, `grpc_status="9"`},
		{"response_total", `direction="inbound"`, `classification="failure"`, `grpc_status="12"`},
	} {
		w := viaHTTP.b.metric(t, labels[0], labels[1:]...)
		assert.Positive(t, w, "%v", labels)
		assert.Equal(t, w, viaFrames.b.metric(t, labels[0], labels[1:]...), "%v", labels)
	}
	// The client proxy's series: by route and by backend endpoint.
	for _, labels := range [][]string{
		{"route_request_total", `direction="outbound"`},
		{"route_response_total", `direction="outbound"`, `classification="success"`, `grpc_status="0"`},
		{"route_response_total", `direction="outbound"`, `classification="failure"`, `grpc_status="9"`},
		{"route_response_total", `direction="outbound"`, `classification="failure"`, `grpc_status="12"`},
		{"request_total", `direction="outbound"`},
		{"response_total", `direction="outbound"`, `classification="success"`, `grpc_status="0"`},
		{"response_total", `direction="outbound"`, `classification="failure"`, `grpc_status="9"`},
		{"response_total", `direction="outbound"`, `classification="failure"`, `grpc_status="12"`},
	} {
		w := viaHTTP.a.metric(t, labels[0], labels[1:]...)
		assert.Positive(t, w, "%v", labels)
		assert.Equal(t, w, viaFrames.a.metric(t, labels[0], labels[1:]...), "%v", labels)
	}
}

// onBothGRPCPaths runs a test of gRPC calls through a server proxy on
// each of its paths for them, given the server proxy's options: the
// frame path (which must serve the test's calls, frames of them) and
// the http.Handler path.
func onBothGRPCPaths(t *testing.T, frames int64, test func(t *testing.T, serverOpts ...dataplane.Option)) {
	t.Run("frame path", func(t *testing.T) {
		var n atomic.Int64
		test(t, dataplane.WithGRPCFrameCountForTest(&n))
		assert.Equal(t, frames, n.Load(), "the calls the frame path served")
	})
	t.Run("http path", func(t *testing.T) { test(t, dataplane.WithoutGRPCFramesForTest()) })
}

// A server proxy with an access log serves gRPC on the http.Handler path
// (the log reads the request and the ResponseWriter): the call is
// logged, and the frame path serves nothing.
func TestWithAnAccessLogGRPCCallsTakeTheHTTPPathAndAreLogged(t *testing.T) {
	app, _ := startRecordingTestService(t)
	var log lockedBuffer
	var frames atomic.Int64
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), app: app,
		cfgB:  func(c *dataplane.Config) { c.AccessLog = dataplane.AccessLogApache },
		optsB: []dataplane.Option{dataplane.WithAccessLog(&log), dataplane.WithGRPCFrameCountForTest(&frames)}})
	conn, err := grpc.NewClient("passthrough:///"+hp.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	_, err = testgrpc.NewTestServiceClient(conn).EmptyCall(ctxTimeout(t, 10*time.Second), &testgrpc.Empty{})
	require.NoError(t, err)
	testutil.Eventually(t, 5*time.Second, func() bool { return len(log.lines()) == 1 && log.lines()[0] != "" }, "one line")
	m := apacheLine.FindStringSubmatch(log.lines()[0])
	require.NotNil(t, m, "line %q", log.lines()[0])
	assert.True(t, strings.HasSuffix(m[6], "/grpc.testing.TestService/EmptyCall"), m[6])
	assert.Zero(t, frames.Load(), "the frame path served nothing")
}

// healthThroughPair starts a server proxy (with serverOpts) in front of
// the gRPC application on port, whose policy pols holds, and a client
// proxy mapping to it, and returns the server proxy and a health client
// whose calls cross both.
func healthThroughPair(t *testing.T, pk *pki, pols *dataplane.MemoryPolicies, port uint16, serverOpts ...dataplane.Option) (*running, healthpb.HealthClient) {
	t.Helper()
	inB := testutil.Listen(t)
	b := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: inB}, serverOpts...)
	res := dataplane.NewMemoryResolver()
	target := "grpc.shop.svc.cluster.local:" + strings.TrimPrefix(inB.Addr().String(), "127.0.0.1:")
	res.Set(target, dataplane.Endpoint{Addr: netipAddrPort(port), Identity: idB, OpaqueTransportPort: uint16(inB.Addr().(*net.TCPAddr).Port)})
	mapped := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: target}}})
	cc, err := grpc.NewClient("passthrough:///"+mapped.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return b, healthpb.NewHealthClient(cc)
}

// withoutContentLength removes content-length from the caller's view of
// calls.
func withoutContentLength(calls map[string]grpcoracle.Result) {
	for _, r := range calls {
		delete(r.Header, "content-length")
		delete(r.Trailer, "content-length")
	}
}
