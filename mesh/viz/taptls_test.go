package viz_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	tappb "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
)

const tapperID = "weft-viz.weft.serviceaccount.identity.weft.cluster.local"

// mtlsTap is a tap server that, like a proxy's, requires a client
// certificate and answers only the tapper identity.
type mtlsTap struct {
	tappb.UnimplementedTapServer
}

func (mtlsTap) Observe(_ *tappb.ObserveRequest, stream grpc.ServerStreamingServer[tappb.TapEvent]) error {
	p, _ := peer.FromContext(stream.Context())
	ti := p.AuthInfo.(credentials.TLSInfo)
	if cs := ti.State.PeerCertificates; len(cs) == 0 || len(cs[0].DNSNames) != 1 || cs[0].DNSNames[0] != tapperID {
		return status.Error(codes.PermissionDenied, "not a tapper")
	}
	return stream.Send(&tappb.TapEvent{ProxyDirection: tappb.TapEvent_INBOUND, Event: &tappb.TapEvent_Http_{Http: &tappb.TapEvent_Http{
		Event: &tappb.TapEvent_Http_RequestInit_{RequestInit: &tappb.TapEvent_Http_RequestInit{Path: "/ok"}}}}})
}

func TestTLSTapVerifiesTheProxyIdentityAndPresentsTheTapperCertificate(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	server := anchor.Leaf(t, testutil.CertOptions{Name: apiID})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: testutil.Pool(anchor), MinVersion: tls.VersionTLS13, NextProtos: []string{"h2"},
	})))
	tappb.RegisterTapServer(srv, mtlsTap{})
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()

	target := apiPod
	target.Tap = l.Addr().String()
	src := &viz.Static{List: []viz.Target{target}}
	tap := func(id string, trusted bool) error {
		leaf := anchor.Leaf(t, testutil.CertOptions{Name: id})
		roots := testutil.Pool(anchor)
		if !trusted {
			roots = testutil.Pool(testutil.NewAnchor(t, testutil.CertOptions{Name: "other"}))
		}
		ts := &viz.TLSTap{Source: src, Config: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, RootCAs: roots}}
		defer ts.Close()
		ctx, cancel := context.WithCancel(testutil.Context(t, 0))
		defer cancel()
		s, err := ts.Tap(ctx, target, viz.TapRequest{})
		if err != nil {
			return err
		}
		e, err := s.Recv()
		if err == nil {
			assert.Equal(t, "/ok", e.Path)
		}
		return err
	}
	require.NoError(t, tap(tapperID, true))
	assert.Equal(t, codes.PermissionDenied, status.Code(tap(webID, true)), "another identity is refused by the proxy")
	assert.Error(t, tap(tapperID, false), "a server the mesh roots do not vouch for is refused")

	wrong := target
	wrong.Identity = webID // the server does not hold this identity
	ts := &viz.TLSTap{Source: src, Config: &tls.Config{Certificates: []tls.Certificate{anchor.Leaf(t, testutil.CertOptions{Name: tapperID}).TLS}, RootCAs: testutil.Pool(anchor)}}
	defer ts.Close()
	s, err := ts.Tap(testutil.Context(t, 0), wrong, viz.TapRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	assert.Error(t, err, "the proxy must hold the target's identity")

	_, err = (&viz.TLSTap{Source: src, Config: &tls.Config{}}).Tap(t.Context(), target, viz.TapRequest{})
	assert.ErrorContains(t, err, "tapper certificate")
}
