package control_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy"
)

// Stream routes end to end: a real policy controller serves TLSRoutes
// and TCPRoutes over gRPC to a real proxy, whose client connections go
// through real sockets to loopback servers standing for Services and
// external hosts. TLS is the clients' own, end to end: the proxy only
// reads the ClientHello's SNI and hands every byte on.

// nameServer accepts connections and answers each with its name: after a
// TLS handshake when it has a certificate, else at once (then it reads
// until the client closes, so that closing never resets unread bytes).
// It counts what it accepted.
type nameServer struct {
	l        net.Listener
	name     string
	accepted atomic.Int32
	// first is the first byte of the last connection (0x16 for a TLS
	// record).
	first atomic.Int32
}

func startNameServer(t *testing.T, name string, cert *tls.Certificate) *nameServer {
	t.Helper()
	s := &nameServer{l: testutil.Listen(t), name: name}
	go func() {
		for {
			c, err := s.l.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				rc := &firstByteConn{Conn: c, s: s}
				if cert == nil {
					_, _ = io.WriteString(c, name)
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
					_, _ = io.Copy(io.Discard, rc)
					return
				}
				tc := tls.Server(rc, &tls.Config{Certificates: []tls.Certificate{*cert}})
				if tc.Handshake() != nil {
					return
				}
				_, _ = io.WriteString(tc, name)
				_ = tc.Close()
			}()
		}
	}()
	return s
}

type firstByteConn struct {
	net.Conn
	s    *nameServer
	seen bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.seen {
		c.seen = true
		c.s.first.Store(int32(p[0]))
	}
	return n, err
}

func (s *nameServer) endpoint() dataplane.Endpoint {
	return dataplane.Endpoint{Addr: netip.MustParseAddrPort(s.l.Addr().String())}
}

// streamProxy is a proxy of a pod in shop whose mapped listeners stand
// for the authorities given, asking a real policy controller.
type streamProxy struct {
	src       *policy.MemorySource
	resolver  *dataplane.MemoryResolver
	listeners map[string]string // authority -> the proxy's listener
	admin     string
}

func startStreamProxy(t *testing.T, resolver *dataplane.MemoryResolver, objs []runtime.Object, authorities ...string) *streamProxy {
	t.Helper()
	src, x := outboundIndexer(t, objs)
	sp := startStreamProxyIn(t, x, "shop", resolver, authorities...)
	sp.src = src
	return sp
}

// startStreamProxyIn starts the proxy of a pod in namespace ns asking the
// policy controller that serves x (its src is left nil).
func startStreamProxyIn(t *testing.T, x *policy.Indexer, ns string, resolver *dataplane.MemoryResolver, authorities ...string) *streamProxy {
	t.Helper()
	sp := &streamProxy{resolver: resolver, listeners: map[string]string{}}
	op, id := outboundClientIn(t, x, ns)

	cfg := dataplane.DefaultConfig()
	cfg.DetectTimeout = 5 * time.Second
	cfg.ShutdownGracePeriod = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	p, err := dataplane.New(ctx, cfg, id, resolver, nil, dataplane.WithOutboundPolicies(op))
	require.NoError(t, err)
	admin := testutil.Listen(t)
	sp.admin = admin.Addr().String()
	var mapped []dataplane.MappedListener
	for _, a := range authorities {
		l := testutil.Listen(t)
		sp.listeners[a] = l.Addr().String()
		mapped = append(mapped, dataplane.MappedListener{Listener: l, Authority: a})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, dataplane.Listeners{Admin: admin, Mapped: mapped})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return sp
}

// tlsName opens a TLS connection through the proxy's listener for
// authority, with sni, and returns what the server answered, or the
// handshake's error.
func (sp *streamProxy) tlsName(t *testing.T, authority, sni string, roots *x509.CertPool) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", sp.listeners[authority], 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy neither forwarded nor closed the connection")
		return "", err
	}
	b, err := io.ReadAll(tc)
	return string(b), err
}

// tcpName writes a line through the proxy's listener for authority and
// returns what comes back until the connection ends ("" when refused).
func (sp *streamProxy) tcpName(t *testing.T, authority string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", sp.listeners[authority], 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "hello\n")
	require.NoError(t, err)
	b, err := io.ReadAll(c)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy neither forwarded nor closed the connection")
	return string(b)
}

func streamSvc(name string, port int32) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "p", Port: port}}},
	}
}

func parentRef(kind, name string, port int32) gatewayv1.ParentReference {
	g := gatewayv1.Group("core")
	if kind == "EgressNetwork" {
		g = "policy.linkerd.io"
	}
	k := gatewayv1.Kind(kind)
	p := gatewayv1.PortNumber(port)
	return gatewayv1.ParentReference{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(name), Port: &p}
}

func svcBackend(name string, port, weight int32) gatewayv1.BackendRef {
	p := gatewayv1.PortNumber(port)
	return gatewayv1.BackendRef{Weight: &weight, BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: &p}}
}

func egressBackendRef(name string, port int32) gatewayv1.BackendRef {
	g, k := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork")
	p := gatewayv1.PortNumber(port)
	return gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(name), Port: &p}}
}

func tlsRoute(name string, hostnames []string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) *gatewayv1alpha2.TLSRoute {
	r := &gatewayv1alpha2.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1alpha2", Kind: "TLSRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: gatewayv1alpha2.TLSRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Rules:           []gatewayv1alpha2.TLSRouteRule{{BackendRefs: backends}},
		},
	}
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gatewayv1.Hostname(h))
	}
	return r
}

func tcpRoute(name string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) *gatewayv1alpha2.TCPRoute {
	return &gatewayv1alpha2.TCPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1alpha2", Kind: "TCPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: gatewayv1alpha2.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Rules:           []gatewayv1alpha2.TCPRouteRule{{BackendRefs: backends}},
		},
	}
}

const (
	parentAuthority = "parent.shop.svc.cluster.local:443"
	dbAuthority     = "db.shop.svc.cluster.local:7000"
)

func TestATLSRouteSendsBySNIAndATCPRouteSplitsByWeight(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.example.com"})
	roots := testutil.Pool(anchor)
	certFor := func(names ...string) *tls.Certificate {
		leaf := anchor.Leaf(t, testutil.CertOptions{Name: names[0], DNSNames: names})
		return &leaf.TLS
	}
	parent := startNameServer(t, "parent", certFor("blue.example.com", "green.example.com", "red.example.com"))
	blue := startNameServer(t, "blue", certFor("blue.example.com"))
	green := startNameServer(t, "green", certFor("green.example.com"))
	db, dbBlue, dbGreen := startNameServer(t, "db", nil), startNameServer(t, "db-blue", nil), startNameServer(t, "db-green", nil)
	resolver := dataplane.NewMemoryResolver()
	resolver.Set(parentAuthority, parent.endpoint())
	resolver.Set("blue.shop.svc.cluster.local:8443", blue.endpoint())
	resolver.Set("green.shop.svc.cluster.local:8443", green.endpoint())
	resolver.Set(dbAuthority, db.endpoint())
	resolver.Set("db-blue.shop.svc.cluster.local:7000", dbBlue.endpoint())
	resolver.Set("db-green.shop.svc.cluster.local:7000", dbGreen.endpoint())

	split := func(blueWeight, greenWeight int32) runtime.Object {
		return tcpRoute("split", parentRef("Service", "db", 7000), svcBackend("db-blue", 7000, blueWeight), svcBackend("db-green", 7000, greenWeight))
	}
	objs := func(tcp runtime.Object) []runtime.Object {
		return []runtime.Object{
			streamSvc("parent", 443), streamSvc("blue", 8443), streamSvc("green", 8443), streamSvc("db", 7000), streamSvc("db-blue", 7000), streamSvc("db-green", 7000),
			tlsRoute("to-blue", []string{"blue.example.com"}, parentRef("Service", "parent", 443), svcBackend("blue", 8443, 1)),
			tlsRoute("to-green", []string{"green.example.com"}, parentRef("Service", "parent", 443), svcBackend("green", 8443, 1)),
			tcp,
		}
	}
	sp := startStreamProxy(t, resolver, objs(split(0, 100)), parentAuthority, dbAuthority)

	t.Run("a TLSRoute sends by SNI", func(t *testing.T) {
		for range 3 {
			got, err := sp.tlsName(t, parentAuthority, "blue.example.com", roots)
			require.NoError(t, err)
			assert.Equal(t, "blue", got, "blue.example.com lands on blue")
			got, err = sp.tlsName(t, parentAuthority, "green.example.com", roots)
			require.NoError(t, err)
			assert.Equal(t, "green", got, "green.example.com lands on green")
		}
		assert.Zero(t, parent.accepted.Load(), "the parent Service's own endpoint saw nothing")
	})

	t.Run("an unmatched SNI is refused", func(t *testing.T) {
		before := blue.accepted.Load() + green.accepted.Load() + parent.accepted.Load()
		_, err := sp.tlsName(t, parentAuthority, "red.example.com", roots)
		require.Error(t, err, "no route for red.example.com")
		assert.Equal(t, before, blue.accepted.Load()+green.accepted.Load()+parent.accepted.Load(), "no backend was dialled")
		assert.Contains(t, metrics(t, sp.admin, "tcp_refused_total"), `reason="no-route"`, "the refusal is counted")
	})

	t.Run("a TCPRoute splits by weight", func(t *testing.T) {
		for range 5 {
			assert.Equal(t, "db-green", sp.tcpName(t, dbAuthority), "0/100: every connection to db-green")
		}
		sp.src.Set(policyObjects(t, objs(split(100, 0))))
		testutil.Eventually(t, 10*time.Second, func() bool { return sp.tcpName(t, dbAuthority) == "db-blue" }, "the new weights reach the proxy")
		for range 5 {
			assert.Equal(t, "db-blue", sp.tcpName(t, dbAuthority), "100/0: every connection to db-blue")
		}
		assert.Zero(t, db.accepted.Load(), "the db Service's own endpoint saw nothing")
	})
}

// Linkerd's e2e_egress_network.rs TLS and TCP route cases, with loopback
// listeners for the Internet hosts they reach.
func TestLinkerdEgressNetworkStreamRoutesEndToEnd(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.example.com"})
	roots := testutil.Pool(anchor)
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: "allowed.example.com", DNSNames: []string{"allowed.example.com", "other.example.com"}})
	// start runs an external TLS host, an external TCP host, an
	// in-cluster Service web (plain TCP) and a proxy with listeners for
	// the two external hosts; objs gives the policy for them.
	type world struct {
		sp                    *streamProxy
		tlsHost, tcpHost, web *nameServer
		tlsAddr, tcpAddr      string
	}
	start := func(t *testing.T, objs func(w *world) []runtime.Object) *world {
		w := &world{tlsHost: startNameServer(t, "external-tls", &leaf.TLS), tcpHost: startNameServer(t, "external-tcp", nil), web: startNameServer(t, "web", nil)}
		w.tlsAddr, w.tcpAddr = w.tlsHost.l.Addr().String(), w.tcpHost.l.Addr().String()
		resolver := dataplane.NewMemoryResolver()
		resolver.Set("web.shop.svc.cluster.local:80", w.web.endpoint())
		w.sp = startStreamProxy(t, resolver, objs(w), w.tlsAddr, w.tcpAddr)
		return w
	}
	egress := func(tp v1alpha1.TrafficPolicy) *v1alpha1.EgressNetwork { return egressNetwork(tp, nil) }
	port := func(addr string) int32 { return int32(netip.MustParseAddrPort(addr).Port()) }

	t.Run("explicit_allow_tls_route", func(t *testing.T) {
		w := start(t, func(w *world) []runtime.Object { return []runtime.Object{egress(v1alpha1.TrafficPolicyDeny)} })
		_, err := w.sp.tlsName(t, w.tlsAddr, "allowed.example.com", roots)
		require.Error(t, err, "blocked before the route exists")
		w.sp.src.Set(policyObjects(t, []runtime.Object{egress(v1alpha1.TrafficPolicyDeny),
			tlsRoute("tls-route", []string{"allowed.example.com"}, parentRef("EgressNetwork", "egress", port(w.tlsAddr)), egressBackendRef("egress", port(w.tlsAddr)))}))
		testutil.Eventually(t, 10*time.Second, func() bool {
			got, err := w.sp.tlsName(t, w.tlsAddr, "allowed.example.com", roots)
			return err == nil && got == "external-tls"
		}, "the route allows allowed.example.com")
		accepted := w.tlsHost.accepted.Load()
		_, err = w.sp.tlsName(t, w.tlsAddr, "other.example.com", roots)
		require.Error(t, err, "the EgressNetwork's default route still refuses another name")
		assert.Equal(t, accepted, w.tlsHost.accepted.Load(), "the refused name never reached the host")
	})

	t.Run("explicit_allow_tcp_route", func(t *testing.T) {
		w := start(t, func(w *world) []runtime.Object { return []runtime.Object{egress(v1alpha1.TrafficPolicyDeny)} })
		assert.Equal(t, "", w.sp.tcpName(t, w.tcpAddr), "blocked before the route exists")
		w.sp.src.Set(policyObjects(t, []runtime.Object{egress(v1alpha1.TrafficPolicyDeny),
			tcpRoute("tcp-route", parentRef("EgressNetwork", "egress", port(w.tcpAddr)), egressBackendRef("egress", port(w.tcpAddr)))}))
		testutil.Eventually(t, 10*time.Second, func() bool { return w.sp.tcpName(t, w.tcpAddr) == "external-tcp" }, "the route allows the TCP host")
	})

	t.Run("routing_back_to_cluster_tls_route", func(t *testing.T) {
		w := start(t, func(w *world) []runtime.Object {
			return []runtime.Object{egress(v1alpha1.TrafficPolicyAllow), streamSvc("web", 80),
				tlsRoute("tls-route", []string{"allowed.example.com"}, parentRef("EgressNetwork", "egress", port(w.tlsAddr)), svcBackend("web", 80, 1))}
		})
		_, err := w.sp.tlsName(t, w.tlsAddr, "allowed.example.com", roots)
		require.Error(t, err, "the in-cluster Service does not speak TLS (as in Linkerd's case)")
		assert.Equal(t, int32(1), w.web.accepted.Load(), "the route sent the connection back into the cluster")
		testutil.Eventually(t, 10*time.Second, func() bool { return w.web.first.Load() == 0x16 }, "the in-cluster Service got the client's ClientHello, a TLS record")
		assert.Zero(t, w.tlsHost.accepted.Load(), "the external host did not see it")
		got, err := w.sp.tlsName(t, w.tlsAddr, "other.example.com", roots)
		require.NoError(t, err)
		assert.Equal(t, "external-tls", got, "another name goes out, under Allow")
	})

	t.Run("routing_back_to_cluster_tcp_route", func(t *testing.T) {
		w := start(t, func(w *world) []runtime.Object {
			return []runtime.Object{egress(v1alpha1.TrafficPolicyAllow), streamSvc("web", 80),
				tcpRoute("tcp-route", parentRef("EgressNetwork", "egress", port(w.tcpAddr)), svcBackend("web", 80, 1))}
		})
		assert.Equal(t, "web", w.sp.tcpName(t, w.tcpAddr), "the route sends the connection back into the cluster")
		assert.Zero(t, w.tcpHost.accepted.Load(), "the external host did not see it")
	})
}

// hasSeries reports whether the exposition text has a series of family
// with every label of want (and any others) and the value value.
func hasSeries(text, family string, want map[string]string, value string) bool {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, family+"{") || !strings.HasSuffix(line, "} "+value) {
			continue
		}
		all := true
		for k, v := range want {
			if !strings.Contains(line, k+`="`+v+`"`) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// The route metrics of connections the proxy routes without reading
// HTTP, under Linkerd's names and labels: a TLSRoute, a TCPRoute, and an
// EgressNetwork's built-in route refusing opaque traffic.
func TestStreamRouteMetricsNameTheParentAndTheRouteAsLinkerdDoes(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.example.com"})
	roots := testutil.Pool(anchor)
	blueLeaf := anchor.Leaf(t, testutil.CertOptions{Name: "blue.example.com", DNSNames: []string{"blue.example.com"}})
	blue := startNameServer(t, "blue", &blueLeaf.TLS)
	dbBlue := startNameServer(t, "db-blue", nil)
	external := startNameServer(t, "external-tcp", nil)
	extAddr := external.l.Addr().String()
	resolver := dataplane.NewMemoryResolver()
	resolver.Set(parentAuthority, startNameServer(t, "parent", nil).endpoint())
	resolver.Set("blue.shop.svc.cluster.local:8443", blue.endpoint())
	resolver.Set(dbAuthority, startNameServer(t, "db", nil).endpoint())
	resolver.Set("db-blue.shop.svc.cluster.local:7000", dbBlue.endpoint())
	sp := startStreamProxy(t, resolver, []runtime.Object{
		streamSvc("parent", 443), streamSvc("blue", 8443), streamSvc("db", 7000), streamSvc("db-blue", 7000),
		tlsRoute("to-blue", []string{"blue.example.com"}, parentRef("Service", "parent", 443), svcBackend("blue", 8443, 1)),
		tcpRoute("to-db-blue", parentRef("Service", "db", 7000), svcBackend("db-blue", 7000, 1)),
		egressNetwork(v1alpha1.TrafficPolicyDeny, nil),
	}, parentAuthority, dbAuthority, extAddr)

	got, err := sp.tlsName(t, parentAuthority, "blue.example.com", roots)
	require.NoError(t, err)
	require.Equal(t, "blue", got)
	require.Equal(t, "db-blue", sp.tcpName(t, dbAuthority))
	require.Equal(t, "", sp.tcpName(t, extAddr), "the EgressNetwork denies")
	require.Zero(t, external.accepted.Load())

	tlsLabels := map[string]string{
		"parent_group": "core", "parent_kind": "Service", "parent_namespace": "shop", "parent_name": "parent", "parent_port": "443", "parent_section_name": "",
		"route_group": "gateway.networking.k8s.io", "route_kind": "TLSRoute", "route_namespace": "shop", "route_name": "to-blue", "hostname": "",
	}
	tcpLabels := map[string]string{
		"parent_kind": "Service", "parent_namespace": "shop", "parent_name": "db", "parent_port": "7000",
		"route_group": "gateway.networking.k8s.io", "route_kind": "TCPRoute", "route_namespace": "shop", "route_name": "to-db-blue",
	}
	denyLabels := map[string]string{
		"parent_group": "policy.linkerd.io", "parent_kind": "EgressNetwork", "parent_namespace": "shop", "parent_name": "egress",
		"route_group": "", "route_kind": "default", "route_namespace": "", "route_name": "tcp-egress-deny",
		"target_ip": "127.0.0.1", "target_port": strconv.Itoa(int(netip.MustParseAddrPort(extAddr).Port())),
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for mk, mv := range m {
			out[mk] = mv
		}
		return out
	}
	var text string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the proxy's route series:\n%s", text)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() bool {
		text = metrics(t, sp.admin, "_route_")
		return hasSeries(text, "outbound_tls_route_open_total", tlsLabels, "1") &&
			hasSeries(text, "outbound_tls_route_close_total", with(tlsLabels, "error", ""), "1") &&
			hasSeries(text, "outbound_tcp_route_open_total", tcpLabels, "1") &&
			hasSeries(text, "outbound_tcp_route_close_total", with(tcpLabels, "error", ""), "1") &&
			hasSeries(text, "outbound_tcp_route_open_total", denyLabels, "1") &&
			hasSeries(text, "outbound_tcp_route_close_total", with(denyLabels, "error", "forbidden"), "1")
	}, "route metrics for the TLSRoute, the TCPRoute and the EgressNetwork's deny route")
}
