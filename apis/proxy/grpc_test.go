package proxy_test

// These tests play the part of a client generated from the upstream schema:
// they call our registered services over a real loopback gRPC connection
// using only the upstream method paths and hand-written protobuf bytes, with
// a codec that passes bytes through untouched.

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
)

// rawCodec sends and receives *[]byte as they are. Its name is "proto" so
// the request carries the same content-type as a real protobuf client's.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, errors.New("rawCodec: want *[]byte")
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec: want *[]byte")
	}
	*b = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// fakeIdentity answers Certify with a fixed certificate when the request
// carries the expected identity.
type fakeIdentity struct {
	identity.UnimplementedIdentityServer
}

func (fakeIdentity) Certify(_ context.Context, req *identity.CertifyRequest) (*identity.CertifyResponse, error) {
	if req.GetIdentity() != "web.shop.serviceaccount.identity.weft.cluster.local" || string(req.GetToken()) != "token" {
		return nil, status.Errorf(codes.InvalidArgument, "unexpected request %v", req)
	}
	return &identity.CertifyResponse{
		LeafCertificate:          []byte("leaf"),
		IntermediateCertificates: [][]byte{[]byte("issuer")},
	}, nil
}

// fakeDestination answers Get with no_endpoints{exists: true} for one path.
type fakeDestination struct {
	destination.UnimplementedDestinationServer
}

func (fakeDestination) Get(req *destination.GetDestination, stream grpc.ServerStreamingServer[destination.Update]) error {
	if req.GetScheme() != "k8s" || req.GetPath() != "web.shop.svc.cluster.local:80" {
		return status.Errorf(codes.InvalidArgument, "unexpected request %v", req)
	}
	return stream.Send(&destination.Update{Update: &destination.Update_NoEndpoints{
		NoEndpoints: &destination.NoEndpoints{Exists: true},
	}})
}

// serve starts a gRPC server on loopback with all four proxy API services
// registered and returns a client connection to it.
func serve(t *testing.T) *grpc.ClientConn {
	t.Helper()
	srv := grpc.NewServer()
	identity.RegisterIdentityServer(srv, fakeIdentity{})
	destination.RegisterDestinationServer(srv, fakeDestination{})
	inbound.RegisterInboundServerPoliciesServer(srv, inbound.UnimplementedInboundServerPoliciesServer{})
	outbound.RegisterOutboundPoliciesServer(srv, outbound.UnimplementedOutboundPoliciesServer{})
	tap.RegisterTapServer(srv, tap.UnimplementedTapServer{})

	lis := testutil.Listen(t)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		require.NoError(t, <-done)
	})

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestUpstreamCertifyCallReachesOurIdentityServer(t *testing.T) {
	conn := serve(t)
	ctx := testutil.Context(t, 0)

	req := wire{
		str(1, "web.shop.serviceaccount.identity.weft.cluster.local"), // CertifyRequest.identity = 1
		raw(2, []byte("token")), // CertifyRequest.token = 2
		raw(3, []byte("csr")),   // CertifyRequest.certificate_signing_request = 3
	}.encode()
	var resp []byte
	err := conn.Invoke(ctx, "/io.linkerd.proxy.identity.Identity/Certify", &req, &resp, grpc.ForceCodec(rawCodec{}))
	require.NoError(t, err)

	want := wire{
		raw(1, []byte("leaf")),   // CertifyResponse.leaf_certificate = 1
		raw(2, []byte("issuer")), // CertifyResponse.intermediate_certificates = 2
	}
	assert.Equal(t, want.normalized(), walk(t, resp, want).normalized())
}

func TestUpstreamGetCallStreamsFromOurDestinationServer(t *testing.T) {
	conn := serve(t)
	ctx := testutil.Context(t, 0)

	desc := &grpc.StreamDesc{StreamName: "Get", ServerStreams: true}
	stream, err := conn.NewStream(ctx, desc, "/io.linkerd.proxy.destination.Destination/Get", grpc.ForceCodec(rawCodec{}))
	require.NoError(t, err)
	req := wire{
		str(1, "k8s"),                           // GetDestination.scheme = 1
		str(2, "web.shop.svc.cluster.local:80"), // GetDestination.path = 2
	}.encode()
	require.NoError(t, stream.SendMsg(&req))
	require.NoError(t, stream.CloseSend())

	var resp []byte
	require.NoError(t, stream.RecvMsg(&resp))
	want := wire{sub(3, varint(1, 1))} // Update.no_endpoints = 3, NoEndpoints.exists = 1
	assert.Equal(t, want.normalized(), walk(t, resp, want).normalized())

	assert.ErrorIs(t, stream.RecvMsg(&resp), io.EOF, "the stream must end after the server returns")
}

func TestEveryUpstreamMethodPathIsServedByOurRegistrations(t *testing.T) {
	conn := serve(t)

	// Methods the fakes do not implement must reach the generated
	// Unimplemented stubs ("method X not implemented"), not gRPC's
	// unknown-service or unknown-method answer.
	cases := []struct {
		path   string
		stream bool
	}{
		{"/io.linkerd.proxy.destination.Destination/GetProfile", true},
		{"/io.linkerd.proxy.inbound.InboundServerPolicies/GetPort", false},
		{"/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort", true},
		{"/io.linkerd.proxy.outbound.OutboundPolicies/Get", false},
		{"/io.linkerd.proxy.outbound.OutboundPolicies/Watch", true},
		{"/io.linkerd.proxy.tap.Tap/Observe", true},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			ctx := testutil.Context(t, 0)
			req := []byte{}
			var resp []byte
			var err error
			if tc.stream {
				var s grpc.ClientStream
				s, err = conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, tc.path, grpc.ForceCodec(rawCodec{}))
				require.NoError(t, err)
				require.NoError(t, s.SendMsg(&req))
				require.NoError(t, s.CloseSend())
				err = s.RecvMsg(&resp)
			} else {
				err = conn.Invoke(ctx, tc.path, &req, &resp, grpc.ForceCodec(rawCodec{}))
			}
			st, ok := status.FromError(err)
			require.True(t, ok, "want a gRPC status, got %v", err)
			assert.Equal(t, codes.Unimplemented, st.Code())
			assert.Contains(t, st.Message(), "not implemented")
			assert.NotContains(t, st.Message(), "unknown")
		})
	}

	t.Run("a path outside the schema is refused as unknown", func(t *testing.T) {
		ctx := testutil.Context(t, 0)
		req := []byte{}
		var resp []byte
		err := conn.Invoke(ctx, "/io.linkerd.proxy.destination.Destination/Resolve", &req, &resp, grpc.ForceCodec(rawCodec{}))
		st, ok := status.FromError(err)
		require.True(t, ok, "want a gRPC status, got %v", err)
		assert.Equal(t, codes.Unimplemented, st.Code())
		assert.Contains(t, st.Message(), "unknown")
	})
}
