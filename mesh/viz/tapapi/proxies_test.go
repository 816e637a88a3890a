package tapapi_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	netpb "github.com/weftmesh/weft/apis/proxy/net"
	tappb "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

// proxyTap is a proxy's tap service: it reports one request to
// /items and holds the stream until the tapper leaves, recording the
// tapper's certificate name.
type proxyTap struct {
	tappb.UnimplementedTapServer
	got chan string
}

func (p *proxyTap) Observe(req *tappb.ObserveRequest, stream grpc.ServerStreamingServer[tappb.TapEvent]) error {
	tapper := ""
	if pi, ok := peerTLS(stream.Context()); ok && len(pi.PeerCertificates) > 0 {
		tapper = pi.PeerCertificates[0].DNSNames[0]
	}
	p.got <- tapper
	src := &netpb.TcpAddress{Ip: &netpb.IPAddress{Ip: &netpb.IPAddress_Ipv4{Ipv4: 0x0a000009}}, Port: 40000}
	dst := &netpb.TcpAddress{Ip: &netpb.IPAddress{Ip: &netpb.IPAddress_Ipv4{Ipv4: 0x0a000007}}, Port: 8080}
	id := &tappb.TapEvent_Http_StreamId{Base: 1, Stream: 1}
	ev := &tappb.TapEvent{Source: src, Destination: dst, ProxyDirection: tappb.TapEvent_INBOUND,
		Event: &tappb.TapEvent_Http_{Http: &tappb.TapEvent_Http{Event: &tappb.TapEvent_Http_RequestInit_{RequestInit: &tappb.TapEvent_Http_RequestInit{
			Id: id, Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}, Path: "/items"}}}}}
	if err := stream.Send(ev); err != nil {
		return err
	}
	end := &tappb.TapEvent{Source: src, Destination: dst, ProxyDirection: tappb.TapEvent_INBOUND,
		Event: &tappb.TapEvent_Http_{Http: &tappb.TapEvent_Http{Event: &tappb.TapEvent_Http_ResponseEnd_{ResponseEnd: &tappb.TapEvent_Http_ResponseEnd{
			Id: id, SinceRequestInit: durationpb.New(time.Millisecond)}}}}}
	if err := stream.Send(end); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// meshPKI is a mesh's trust anchor with a proxy and a tapper identity.
type meshPKI struct {
	anchor *testutil.CA
	proxy  *testutil.Leaf
	tapper *testutil.Leaf
}

const webID = "web.shop.serviceaccount.identity.weft.cluster.local"

func newMeshPKI(t *testing.T) *meshPKI {
	a := testutil.NewAnchor(t, testutil.CertOptions{Name: "identity.weft.cluster.local"})
	return &meshPKI{anchor: a, proxy: a.Leaf(t, testutil.CertOptions{Name: webID}),
		tapper: a.Leaf(t, testutil.CertOptions{Name: "weft-tap.weft.serviceaccount.identity.weft.cluster.local"})}
}

// serveProxyTap starts a tap server with the proxy's certificate that
// requires a client certificate of the mesh.
func serveProxyTap(t *testing.T, m *meshPKI) (string, *proxyTap) {
	l := testutil.Listen(t)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{m.proxy.TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: testutil.Pool(m.anchor), MinVersion: tls.VersionTLS13})
	srv := grpc.NewServer(grpc.Creds(creds))
	p := &proxyTap{got: make(chan string, 4)}
	tappb.RegisterTapServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String(), p
}

// tapperCreds verifies that the proxy proves the identity asked for.
func tapperCreds(m *meshPKI) tapapi.Credentials {
	return func(id string) (credentials.TransportCredentials, error) {
		return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{m.tapper.TLS}, RootCAs: testutil.Pool(m.anchor),
			ServerName: id, MinVersion: tls.VersionTLS13}), nil
	}
}

func TestProxiesTapAProxyOverMutualTLSWithTheTapperIdentity(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	m := newMeshPKI(t)
	addr, p := serveProxyTap(t, m)
	web := target("shop", "web-1", "web", "10.0.0.7")
	web.Identity, web.Tap = webID, addr
	client := target("shop", "load-1", "load", "10.0.0.9")
	b, err := tapapi.NewProxies(func(context.Context, string) ([]viz.Target, error) { return []viz.Target{web, client}, nil }, tapperCreds(m))
	require.NoError(t, err)

	all, err := b.Targets(ctx, "shop")
	require.NoError(t, err)
	tapCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := b.Tap(tapCtx, web, viz.TapRequest{}, viz.NewAddresses(all))
	require.NoError(t, err)
	defer s.Close()
	e, err := s.Recv()
	require.NoError(t, err)
	assert.Equal(t, "weft-tap.weft.serviceaccount.identity.weft.cluster.local", <-p.got, "the proxy saw the tapper's certificate")
	assert.Equal(t, viz.RequestInit, e.Kind)
	assert.Equal(t, "/items", e.Path)
	assert.Equal(t, "shop/web-1", e.Proxy)
	assert.Equal(t, "load", e.SourceMeta["deployment"], "peers are named from the namespace's pods")
	_, err = s.Recv()
	require.NoError(t, err)
}

func TestProxiesRefuseAProxyThatDoesNotProveTheTargetsIdentity(t *testing.T) {
	ctx := testutil.Context(t, 30*time.Second)
	m := newMeshPKI(t)
	addr, p := serveProxyTap(t, m)
	imposter := target("shop", "db-1", "db", "10.0.0.8") // expects db's identity; the server holds web's
	imposter.Tap = addr
	b, err := tapapi.NewProxies(func(context.Context, string) ([]viz.Target, error) { return nil, nil }, tapperCreds(m))
	require.NoError(t, err)

	s, err := b.Tap(ctx, imposter, viz.TapRequest{}, nil)
	if err == nil {
		defer s.Close()
		_, err = s.Recv()
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "db.shop.serviceaccount.identity.weft.cluster.local")
	assert.Empty(t, p.got, "no tap reached the server")

	noTap := target("shop", "web-2", "web", "10.0.0.10")
	noTap.Tap = ""
	_, err = b.Tap(ctx, noTap, viz.TapRequest{}, nil)
	require.ErrorContains(t, err, "serves no tap")
}
