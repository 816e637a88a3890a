package control_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/discovery"
	dclient "github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
	"github.com/weftmesh/weft/mesh/local"
	"github.com/weftmesh/weft/mesh/policy"
)

const meshYAML = `
namespace: shop
workloads:
- name: api
  replicas: 2
  ports: [{name: http, port: 8080}, {name: db, port: 5432, opaque: true}]
- name: web
  calls: [{service: api, port: http}]
policies:
- {workload: api, port: http, allow: [web]}
`

func plan(t *testing.T, src string) *local.Plan {
	t.Helper()
	f, err := local.Parse("test.yaml", []byte(src))
	require.NoError(t, err)
	p, err := local.NewPlan(f, netip.MustParseAddr("127.0.9.0"))
	require.NoError(t, err)
	return p
}

// serve runs s on a loopback listener and returns a client connection.
func serve(t *testing.T, register func(grpc.ServiceRegistrar)) (*grpc.ClientConn, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn, lis.Addr().String()
}

func destination(t *testing.T, objs []runtime.Object) (*discovery.Index, *grpc.ClientConn) {
	t.Helper()
	idx, err := discovery.NewIndex(discovery.WithControlPlaneNamespace("weft"))
	require.NoError(t, err)
	t.Cleanup(func() { idx.Close() })
	require.NoError(t, idx.Replace(discoveryObjects(objs)))
	srv, err := discovery.NewServer(idx)
	require.NoError(t, err)
	conn, _ := serve(t, srv.Register)
	return idx, conn
}

// discoveryObjects keeps the kinds discovery reads.
func discoveryObjects(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Namespace, *corev1.Pod, *corev1.Service, *discoveryv1.EndpointSlice:
			out = append(out, o)
		}
	}
	return out
}

func next[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		require.True(t, ok, "channel closed")
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10s")
	}
	var zero T
	return zero
}

func TestResolverTranslatesEndpointsWithIdentityHintAndInboundPort(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := destination(t, p.Objects)
	ctx := testContext(t)
	dc, err := dclient.New(ctx, conn)
	require.NoError(t, err)
	defer dc.Close()

	plain, err := control.NewResolver(dc)
	require.NoError(t, err)
	ch, err := plain.Resolve(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	eps := next(t, ch)
	require.Len(t, eps, 2)
	assert.Equal(t, netip.MustParseAddrPort("127.0.9.1:8080"), eps[0].Addr)
	assert.Equal(t, "api.shop.serviceaccount.identity.weft.cluster.local", eps[0].Identity)
	assert.Equal(t, dataplane.HintH2, eps[0].Protocol)
	assert.Zero(t, eps[0].OpaqueTransportPort, "discovery gives h2 endpoints no transport port")
	assert.Equal(t, uint32(10000), eps[0].Weight)

	explicit, err := control.NewResolver(dc, control.WithMeshedInboundPort(4143))
	require.NoError(t, err)
	ch, err = explicit.Resolve(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	eps = next(t, ch)
	require.Len(t, eps, 2)
	assert.Equal(t, uint16(4143), eps[1].OpaqueTransportPort)

	// An opaque port: discovery sends the hint and the proxy's inbound
	// port (from the pod's WEFT_PROXY_INBOUND_ADDR).
	ch, err = plain.Resolve(ctx, local.Authority("shop", "api", 5432))
	require.NoError(t, err)
	eps = next(t, ch)
	require.Len(t, eps, 2)
	assert.Equal(t, dataplane.HintOpaque, eps[0].Protocol)
	assert.Equal(t, uint16(4143), eps[0].OpaqueTransportPort)
}

func TestResolverReportsAnUnknownServiceAsNotFound(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := destination(t, p.Objects)
	ctx := testContext(t)
	dc, err := dclient.New(ctx, conn)
	require.NoError(t, err)
	defer dc.Close()
	r, err := control.NewResolver(dc)
	require.NoError(t, err)
	_, err = r.Resolve(ctx, local.Authority("shop", "nothere", 80))
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	_, err = r.Resolve(ctx, "not a name")
	require.Error(t, err)
	assert.NotErrorIs(t, err, dataplane.ErrNotFound)
}

func TestResolverFollowsChangesAndEmptiesARemovedService(t *testing.T) {
	p := plan(t, meshYAML)
	idx, conn := destination(t, p.Objects)
	ctx := testContext(t)
	dc, err := dclient.New(ctx, conn)
	require.NoError(t, err)
	defer dc.Close()
	r, err := control.NewResolver(dc)
	require.NoError(t, err)
	ch, err := r.Resolve(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	require.Len(t, next(t, ch), 2)

	// Scale to one replica.
	one := plan(t, `namespace: shop
workloads:
- name: api
  ports: [{name: http, port: 8080}, {name: db, port: 5432, opaque: true}]
- name: web
`)
	require.NoError(t, idx.Replace(discoveryObjects(one.Objects)))
	until(t, ch, func(eps []dataplane.Endpoint) bool { return len(eps) == 1 }, "one endpoint after scaling down")

	// Remove the service.
	gone := plan(t, "namespace: shop\nworkloads: [{name: web}]\n")
	require.NoError(t, idx.Replace(discoveryObjects(gone.Objects)))
	until(t, ch, func(eps []dataplane.Endpoint) bool { return eps != nil && len(eps) == 0 }, "an empty set once the service is gone")
}

// until reads sets from ch until ok holds (each set replaces the last, and
// an update may repeat the current one).
func until(t *testing.T, ch <-chan []dataplane.Endpoint, ok func([]dataplane.Endpoint) bool, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case eps, open := <-ch:
			require.True(t, open, "channel closed waiting for %s", what)
			if ok(eps) {
				return
			}
		case <-deadline:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

func policyServer(t *testing.T, objs []runtime.Object) (*policy.MemorySource, *grpc.ClientConn) {
	t.Helper()
	o := &policy.Objects{}
	for _, obj := range objs {
		require.NoError(t, o.Add(obj, policy.Location{}))
	}
	src := policy.NewMemorySource(o)
	ctx := testContext(t)
	x, err := policy.NewIndexer(ctx, src, policy.WithControlPlaneNamespace("weft"))
	require.NoError(t, err)
	go func() { _ = x.Run(ctx) }()
	in, err := policy.NewInboundServer(x)
	require.NoError(t, err)
	out, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	conn, _ := serve(t, func(r grpc.ServiceRegistrar) {
		in.Register(r)
		out.Register(r)
	})
	return src, conn
}

func TestPoliciesWatchAPortAndReportUnknownWorkloadsAsNotFound(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := policyServer(t, p.Objects)
	ctx := testContext(t)

	pol, err := control.NewPolicies(conn, control.Workload("shop", "api-0"))
	require.NoError(t, err)
	ch, err := pol.Watch(ctx, 8080)
	require.NoError(t, err)
	srv := next(t, ch)
	require.NotNil(t, srv)
	var names []string
	for _, a := range srv.GetAuthorizations() {
		for _, id := range a.GetAuthentication().GetMeshTLS().GetIdentities().GetIdentities() {
			names = append(names, id.GetName())
		}
	}
	assert.Contains(t, names, "web.shop.serviceaccount.identity.weft.cluster.local", "the compact policy allows web: %v", srv)

	stranger, err := control.NewPolicies(conn, control.Workload("shop", "nobody-0"))
	require.NoError(t, err)
	_, err = stranger.Watch(ctx, 8080)
	assert.ErrorIs(t, err, dataplane.ErrNotFound)

	_, err = pol.Watch(ctx, 0)
	assert.Error(t, err)
}

func TestPoliciesKeepTheLastPolicyAndReconnectWhenTheStreamBreaks(t *testing.T) {
	p := plan(t, meshYAML)
	o := &policy.Objects{}
	for _, obj := range p.Objects {
		require.NoError(t, o.Add(obj, policy.Location{}))
	}
	ctx := testContext(t)
	x, err := policy.NewIndexer(ctx, policy.NewMemorySource(o), policy.WithControlPlaneNamespace("weft"))
	require.NoError(t, err)
	go func() { _ = x.Run(ctx) }()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	start := func(l net.Listener) *grpc.Server {
		in, err := policy.NewInboundServer(x)
		require.NoError(t, err)
		s := grpc.NewServer()
		in.Register(s)
		go func() { _ = s.Serve(l) }()
		return s
	}
	s1 := start(lis)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	pol, err := control.NewPolicies(conn, control.Workload("shop", "api-1"), control.WithPolicyBackoff(20*time.Millisecond, 200*time.Millisecond))
	require.NoError(t, err)
	ch, err := pol.Watch(ctx, 8080)
	require.NoError(t, err)
	first := next(t, ch)
	require.NotNil(t, first)

	s1.Stop() // the control plane goes away
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("the channel closed when the stream broke")
		}
		_ = v // a policy re-sent is fine
	case <-time.After(300 * time.Millisecond):
	}

	lis2, err := net.Listen("tcp", addr)
	require.NoError(t, err, "could not take the old port back")
	s2 := start(lis2)
	defer s2.Stop()
	again := next(t, ch)
	assert.Equal(t, first.String(), again.String(), "the restarted server's policy arrives on the same channel")
}

func TestConnectObtainsACertificateAndNamesMissingSettings(t *testing.T) {
	_, err := control.Connect(testContext(t), control.Config{})
	require.Error(t, err)
	for _, v := range []string{"WEFT_PROXY_IDENTITY_ADDR", "WEFT_PROXY_DESTINATION_ADDR", "WEFT_PROXY_POLICY_ADDR", "WEFT_PROXY_TRUST_ANCHORS", "WEFT_PROXY_IDENTITY_NAME", "WEFT_PROXY_NAMESPACE", "WEFT_PROXY_POD"} {
		assert.Contains(t, err.Error(), v)
	}

	anchor, err := pki.NewAnchor(pki.Options{})
	require.NoError(t, err)
	issuer, err := pki.NewIssuer(anchor, pki.Options{})
	require.NoError(t, err)
	bundle, err := identity.NewBundle(anchor.Cert)
	require.NoError(t, err)
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	require.NoError(t, err)
	svc, err := identity.NewService(testContext(t), identity.Tokens{"tok-web-0123456789": {Namespace: "shop", Name: "web"}}, ca)
	require.NoError(t, err)
	_, idAddr := serve(t, svc.Register)
	p := plan(t, meshYAML)
	_, dstConn := destination(t, p.Objects)
	_ = dstConn
	_, polConn := policyServer(t, p.Objects)
	_ = polConn

	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("tok-web-0123456789"), 0o600))
	var cfg control.Config
	cfg.IdentityAddr, cfg.DestinationAddr, cfg.PolicyAddr = idAddr, dstConn.Target(), polConn.Target()
	cfg.TrustAnchorsPEM = anchor.CertPEM
	cfg.IdentityName = "web.shop.serviceaccount.identity.weft.cluster.local"
	cfg.IdentityTokenFile = tok
	cfg.Namespace, cfg.Pod = "shop", "web-0"
	src, err := control.Connect(testContext(t), cfg, control.WithExplicitMode(4143))
	require.NoError(t, err)
	defer src.Close()

	assert.Equal(t, cfg.IdentityName, src.Identity.Name())
	cert, err := src.Identity.Certificate()
	require.NoError(t, err)
	require.NotNil(t, cert.Leaf)
	assert.Equal(t, []string{cfg.IdentityName}, cert.Leaf.DNSNames)
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		inter.AddCert(c)
	}
	_, err = cert.Leaf.Verify(x509.VerifyOptions{Roots: src.Identity.Roots(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)

	ch, err := src.Resolver.Resolve(testContext(t), local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	eps := next(t, ch)
	require.Len(t, eps, 2)
	assert.Equal(t, uint16(4143), eps[0].OpaqueTransportPort)

	// web declares no ports: the policy service answers with the default
	// policy or NotFound (then the proxy applies its own default).
	pch, err := src.Policies.Watch(testContext(t), 8080)
	if !errors.Is(err, dataplane.ErrNotFound) {
		require.NoError(t, err)
		assert.NotNil(t, next[*inbound.Server](t, pch))
	}

	och, err := src.OutboundPolicies.Watch(testContext(t), local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	assert.Equal(t, "api", next(t, och).GetMetadata().GetResource().GetName())
	prch, err := src.Profiles.Watch(testContext(t), local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	assert.Equal(t, "api.shop.svc.cluster.local", next(t, prch).GetFullyQualifiedName())

	assert.NoError(t, src.Close())
	assert.NoError(t, src.Close(), "Close is idempotent")
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
