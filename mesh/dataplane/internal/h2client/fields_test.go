package h2client_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// grpcFields is a gRPC request's regular fields, as a proxy's server
// side decoded them, with fields a client may not send mixed in.
var grpcFields = []hpack.HeaderField{
	{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	{Name: "host", Value: "other"}, {Name: "content-length", Value: "1"}, {Name: "connection", Value: "close"},
	{Name: "x-md", Value: "1"},
}

func TestRoundTripFieldsMakesGRPCCallsAndReturnsTheFields(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil, h2client.WithWindows(65535, 65535))
	for _, size := range []int{10, 3 << 20} {
		in := &testgrpc.SimpleRequest{ResponseSize: int32(size), Payload: &testgrpc.Payload{Body: bytes.Repeat([]byte{7}, size)}}
		resp, err := cc.RoundTripFields(testutil.Context(t, 0), &h2client.FieldRequest{Method: "POST", Scheme: "http", Authority: addr,
			Path: "/grpc.testing.TestService/UnaryCall", Fields: grpcFields, Body: io.NopCloser(bytes.NewReader(grpcFrame(t, in)))})
		require.NoError(t, err)
		assert.Equal(t, 200, resp.Status)
		assert.Contains(t, resp.Fields, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		assert.Nil(t, resp.Trailers(), "no trailers before the body's end")
		var out testgrpc.SimpleResponse
		require.NoError(t, readGRPC(resp.Body, &out))
		assert.Len(t, out.GetPayload().GetBody(), size)
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Empty(t, rest)
		assert.Contains(t, resp.Trailers(), hpack.HeaderField{Name: "grpc-status", Value: "0"})
		resp.Body.Close()
	}
	// A trailers-only answer: the status is in the header fields.
	in := &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: 9, Message: "nope"}}
	resp, err := cc.RoundTripFields(testutil.Context(t, 0), &h2client.FieldRequest{Method: "POST", Scheme: "http", Authority: addr,
		Path: "/grpc.testing.TestService/UnaryCall", Fields: grpcFields, Body: io.NopCloser(bytes.NewReader(grpcFrame(t, in)))})
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Empty(t, b)
	assert.Contains(t, resp.Fields, hpack.HeaderField{Name: "grpc-status", Value: "9"})
	assert.Nil(t, resp.Trailers())
	noClientGoroutinesAfter(t, cc)
}

func TestRoundTripFieldsRefusesFieldsAnHTTPRequestCouldNotCarry(t *testing.T) {
	addr := startGRPC(t)
	cc := dialAddr(t, addr, nil)
	for _, f := range []hpack.HeaderField{
		{Name: ":path", Value: "/smuggled"}, {Name: "X-Upper", Value: "1"}, {Name: "x-bad", Value: "a\r\nb"}, {Name: "", Value: "1"},
	} {
		_, err := cc.RoundTripFields(testutil.Context(t, 0), &h2client.FieldRequest{Method: "POST", Scheme: "http", Authority: addr,
			Path: "/grpc.testing.TestService/UnaryCall", Fields: []hpack.HeaderField{f}})
		assert.Error(t, err, "%q", f.Name)
	}
	for _, r := range []h2client.FieldRequest{
		{Method: "CONNECT", Authority: addr, Path: "/"}, {Method: "P OST", Authority: addr, Path: "/"},
		{Method: "POST", Authority: "a b", Path: "/"}, {Method: "POST", Authority: addr, Path: "x"},
	} {
		_, err := cc.RoundTripFields(testutil.Context(t, 0), &r)
		assert.Error(t, err, "%+v", r)
	}
	noClientGoroutinesAfter(t, cc)
}
