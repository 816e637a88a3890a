package dataplane_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// appMetadata records the metadata grpc-go's server saw, per call (named
// by the x-call field the test sends).
type appMetadata struct {
	mu sync.Mutex
	m  map[string]metadata.MD
}

func (s *appMetadata) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := md.Get("x-call"); len(v) == 1 {
		s.m[v[0]] = md.Copy()
	}
}

func (s *appMetadata) take() map[string]metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	s.m = map[string]metadata.MD{}
	return m
}

// startRecordingTestService serves grpc-go's interop test service over
// h2c, recording the metadata of every call.
func startRecordingTestService(t *testing.T) (*httpApp, *appMetadata) {
	ln := testutil.Listen(t)
	seen := &appMetadata{m: map[string]metadata.MD{}}
	s := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			seen.record(ctx)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			seen.record(ss.Context())
			return h(srv, ss)
		}),
	)
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer())
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return &httpApp{ln: ln}, seen
}

// grpcResult is what a caller got from one call.
type grpcResult struct {
	Header, Trailer metadata.MD
	Responses       [][]byte
	Code            codes.Code
	Message         string
}

// testServiceCalls makes the same calls through the proxy pair at addr:
// unary with metadata echoed in the header and trailers (and mesh
// metadata of the caller's own), an error status (trailers-only), an
// unknown method, large messages both ways, a server stream and a
// bidirectional ping-pong.
func testServiceCalls(t *testing.T, addr string) map[string]grpcResult {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent("oracle"), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20)))
	require.NoError(t, err)
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return b
	}
	out := map[string]grpcResult{}
	unary := func(name string, req *testgrpc.SimpleRequest, md ...string) {
		var res grpcResult
		c := metadata.AppendToOutgoingContext(ctx, append([]string{"x-call", name}, md...)...)
		resp, err := client.UnaryCall(c, req, grpc.Header(&res.Header), grpc.Trailer(&res.Trailer))
		if err == nil {
			res.Responses = [][]byte{marshal(resp)}
		}
		st := status.Convert(err)
		res.Code, res.Message = st.Code(), st.Message()
		out[name] = res
	}
	unary("unary", &testgrpc.SimpleRequest{ResponseSize: 100, Payload: &testgrpc.Payload{Body: make([]byte, 100)}},
		"x-grpc-test-echo-initial", "first", "x-grpc-test-echo-trailing-bin", "\x00\x01\xff", "x-extra", "a", "x-extra", "b",
		"l5d-client-id", "admin.forged", "weft-anything", "forged")
	unary("error", &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: 9, Message: "nope"}})
	unary("large", &testgrpc.SimpleRequest{ResponseSize: 3 << 19, Payload: &testgrpc.Payload{Body: make([]byte, 3<<19)}})

	var res grpcResult
	err = conn.Invoke(metadata.AppendToOutgoingContext(ctx, "x-call", "unknown"), "/grpc.testing.TestService/NoSuchMethod",
		&testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}, grpc.Header(&res.Header), grpc.Trailer(&res.Trailer))
	st := status.Convert(err)
	res.Code, res.Message = st.Code(), st.Message()
	out["unknown"] = res

	res = grpcResult{}
	ss, err := client.StreamingOutputCall(metadata.AppendToOutgoingContext(ctx, "x-call", "server-stream"), &testgrpc.StreamingOutputCallRequest{
		ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}, {Size: 200000}, {Size: 1}}})
	require.NoError(t, err)
	for {
		m, err := ss.Recv()
		if err != nil {
			st := status.New(codes.OK, "")
			if !errors.Is(err, io.EOF) {
				st = status.Convert(err)
			}
			res.Code, res.Message = st.Code(), st.Message()
			break
		}
		res.Responses = append(res.Responses, marshal(m))
	}
	res.Header, _ = ss.Header()
	res.Trailer = ss.Trailer()
	out["server-stream"] = res

	res = grpcResult{}
	bidi, err := client.FullDuplexCall(metadata.AppendToOutgoingContext(ctx, "x-call", "bidi"))
	require.NoError(t, err)
	for _, size := range []int32{5, 70000, 3} {
		require.NoError(t, bidi.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: size}}}))
		m, err := bidi.Recv()
		require.NoError(t, err)
		res.Responses = append(res.Responses, marshal(m))
	}
	require.NoError(t, bidi.CloseSend())
	_, err = bidi.Recv()
	require.ErrorIs(t, err, io.EOF)
	res.Header, _ = bidi.Header()
	res.Trailer = bidi.Trailer()
	out["bidi"] = res
	return out
}

// tapEvents reads n calls' events from an inbound tap, without what
// differs from one pair to the other or from run to run (stream ids, the
// source's address, the authority the caller dialled, durations and the
// deadline left).
func tapEvents(t *testing.T, tap ptap.Tap_ObserveClient) []string {
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
		case *ptap.TapEvent_Http_ResponseEnd_:
			e.ResponseEnd.Id, e.ResponseEnd.SinceRequestInit, e.ResponseEnd.SinceResponseInit = nil, nil, nil
		}
		out = append(out, prototext.Format(ev))
	}
}

// TestGRPCCallsGetTheSameThroughTheFramePathAsThroughTheHTTPPath is the
// differential oracle of the server proxy's frame path: the same gRPC
// calls through two proxy pairs, the server proxy of one with the frame
// path (counted: every call takes it) and of the other without, must
// give the caller the same header, messages, trailers and status, the
// application the same metadata (l5d-client-id the client proxy's
// verified identity, no mesh metadata of the caller's), an inbound tap
// the same events, and the server proxy's inbound series the same counts.
func TestGRPCCallsGetTheSameThroughTheFramePathAsThroughTheHTTPPath(t *testing.T) {
	app, seen := startRecordingTestService(t)
	var frames atomic.Int64
	viaHTTP := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), app: app, cfgB: tapConfig,
		optsB: []dataplane.Option{dataplane.WithoutGRPCFramesForTest()}})
	viaFrames := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), app: app, cfgB: tapConfig,
		optsB: []dataplane.Option{dataplane.WithGRPCFrameCountForTest(&frames)}})

	const calls = 6
	observe := func(hp *httpPair) ptap.Tap_ObserveClient {
		return openTap(t, tapConn(t, hp.pki, idTapper, hp.tapB, idB), hp.b,
			&ptap.ObserveRequest{Limit: calls, Match: pathPrefix("/grpc.testing.TestService/"), Extract: withHeaders()}, 1)
	}
	tapHTTP, tapFrames := observe(viaHTTP), observe(viaFrames)

	want := testServiceCalls(t, viaHTTP.clientAddr)
	seenHTTP := seen.take()
	require.Zero(t, frames.Load())
	got := testServiceCalls(t, viaFrames.clientAddr)
	seenFrames := seen.take()
	assert.Equal(t, int64(calls), frames.Load(), "every call took the frame path")

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

	// At h2server's layer the two differ in the content-length a
	// ResponseWriter adds when it holds a whole body; through the pair
	// the client proxy's ResponseWriter adds it on both.
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
