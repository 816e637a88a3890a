// Package grpcoracle is the gRPC side of the proxy's differential tests:
// grpc-go's interop test service recording the metadata of every call it
// serves, and one fixed list of calls whose results two relays must
// agree on (issue 28: the frame path against the http.Handler path, in
// h2server and through a proxy pair).
package grpcoracle

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Seen is the metadata the service saw, per call (named by the x-call
// field Calls sends).
type Seen struct {
	mu sync.Mutex
	m  map[string]metadata.MD
}

func (s *Seen) record(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := md.Get("x-call"); len(v) == 1 {
		s.m[v[0]] = md.Copy()
	}
}

// Take returns what was seen since the last Take.
func (s *Seen) Take() map[string]metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.m
	s.m = map[string]metadata.MD{}
	return m
}

// Serve serves grpc-go's interop test service over h2c on ln until the
// test ends, recording the metadata of every call.
func Serve(t testing.TB, ln net.Listener) *Seen {
	t.Helper()
	seen := &Seen{m: map[string]metadata.MD{}}
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
	return seen
}

// Result is what a caller got from one call.
type Result struct {
	Header, Trailer metadata.MD
	Responses       [][]byte
	Code            codes.Code
	Message         string
}

// Calls makes the same calls to the test service at addr: unary with
// metadata echoed in the header and trailers (plus unaryMD, pairs of
// name and value), an error status (trailers-only), an unknown method,
// large messages both ways (over a 1 MiB stream window), a server stream
// and a bidirectional ping-pong.
func Calls(t testing.TB, addr string, unaryMD []string, opts ...grpc.DialOption) map[string]Result {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("oracle"),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20))}, opts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
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
	out := map[string]Result{}
	unary := func(name string, req *testgrpc.SimpleRequest, md ...string) {
		var res Result
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
		append([]string{"x-grpc-test-echo-initial", "first", "x-grpc-test-echo-trailing-bin", "\x00\x01\xff", "x-extra", "a", "x-extra", "b"}, unaryMD...)...)
	unary("error", &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: 9, Message: "nope"}})
	unary("large", &testgrpc.SimpleRequest{ResponseSize: 3 << 19, Payload: &testgrpc.Payload{Body: make([]byte, 3<<19)}})

	var res Result
	err = conn.Invoke(metadata.AppendToOutgoingContext(ctx, "x-call", "unknown"), "/grpc.testing.TestService/NoSuchMethod",
		&testgrpc.SimpleRequest{}, &testgrpc.SimpleResponse{}, grpc.Header(&res.Header), grpc.Trailer(&res.Trailer))
	st := status.Convert(err)
	res.Code, res.Message = st.Code(), st.Message()
	out["unknown"] = res

	res = Result{}
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

	res = Result{}
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
