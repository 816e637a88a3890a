package h2client_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// startGRPC serves grpc-go's interop test service over h2c.
func startGRPC(t testing.TB) string {
	t.Helper()
	l := testutil.Listen(t)
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer())
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// grpcFrame is a length-prefixed gRPC message.
func grpcFrame(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return testutil.GRPCFrame(0, b)
}

// readGRPC reads one message into m.
func readGRPC(r io.Reader, m proto.Message) error {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("message body: %w", err)
	}
	return proto.Unmarshal(b, m)
}

func grpcRequest(t testing.TB, addr, method string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 0), "POST", "http://"+addr+"/grpc.testing.TestService/"+method, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	req.ContentLength = -1
	return req
}

func TestGRPCUnaryCallsWithSmallAndLargeMessages(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil, h2client.WithWindows(65535, 65535))
	for _, size := range []int{10, 3 << 20} {
		in := &testgrpc.SimpleRequest{ResponseSize: int32(size), Payload: &testgrpc.Payload{Body: bytes.Repeat([]byte{7}, size)}}
		resp, err := cc.RoundTrip(grpcRequest(t, addr, "UnaryCall", readyBody{bytes.NewReader(grpcFrame(t, in))}))
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		var out testgrpc.SimpleResponse
		require.NoError(t, readGRPC(resp.Body, &out))
		assert.Len(t, out.GetPayload().GetBody(), size)
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Empty(t, rest)
		assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
		resp.Body.Close()
	}
	noClientGoroutinesAfter(t, cc)
}

func TestGRPCServerStreamingDeliversEveryMessageThenTheStatus(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil)
	in := &testgrpc.StreamingOutputCallRequest{}
	for i := 1; i <= 20; i++ {
		in.ResponseParameters = append(in.ResponseParameters, &testgrpc.ResponseParameters{Size: int32(i * 1000)})
	}
	resp, err := cc.RoundTrip(grpcRequest(t, addr, "StreamingOutputCall", readyBody{bytes.NewReader(grpcFrame(t, in))}))
	require.NoError(t, err)
	defer resp.Body.Close()
	for i := 1; i <= 20; i++ {
		var out testgrpc.StreamingOutputCallResponse
		require.NoError(t, readGRPC(resp.Body, &out))
		assert.Len(t, out.GetPayload().GetBody(), i*1000)
	}
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
}

func TestGRPCBidiPingPongStreamsTheRequestBody(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil)
	body := newSlowBody()
	msg := func(n int) []byte {
		return grpcFrame(t, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(n)}}})
	}
	// grpc-go sends the response headers with the first answer, so the
	// first message must be on its way while RoundTrip waits.
	go func() { body.next <- msg(1) }()
	resp, err := cc.RoundTrip(grpcRequest(t, addr, "FullDuplexCall", body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out testgrpc.StreamingOutputCallResponse
	require.NoError(t, readGRPC(resp.Body, &out))
	assert.Len(t, out.GetPayload().GetBody(), 1)
	for _, n := range []int{100, 70000, 3} {
		body.next <- msg(n)
		require.NoError(t, readGRPC(resp.Body, &out))
		assert.Len(t, out.GetPayload().GetBody(), n)
	}
	close(body.next)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
}

func TestGRPCErrorStatusArrivesAsTrailersOnlyResponse(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil)
	in := &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: 9, Message: "nope"}}
	resp, err := cc.RoundTrip(grpcRequest(t, addr, "UnaryCall", readyBody{bytes.NewReader(grpcFrame(t, in))}))
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "9", resp.Header.Get("Grpc-Status")+resp.Trailer.Get("Grpc-Status"))
}
