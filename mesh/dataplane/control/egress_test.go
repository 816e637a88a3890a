package control_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/policy"
)

// The egress end to end: a real policy controller (index, Outbound API
// over gRPC) answers a real proxy's outbound policy client about
// destinations outside any Service: "external" loopback listeners the
// proxy reaches through explicit-mode listeners mapped to their
// addresses. Linkerd's e2e_egress_network.rs cases run here under their
// names, with these listeners for the Internet hosts they curl.

// external is an application outside the mesh: HTTP on one port, a TCP
// echo on another, each counting what reaches it.
type external struct {
	http, tcp   net.Listener
	httpHits    atomic.Int32
	tcpAccepted atomic.Int32
}

func startExternal(t *testing.T) *external {
	e := &external{http: testutil.Listen(t), tcp: testutil.Listen(t)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.httpHits.Add(1)
		fmt.Fprintf(w, "external %s", r.URL.Path)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(e.http) }()
	t.Cleanup(func() { _ = srv.Close() })
	go func() {
		for {
			c, err := e.tcp.Accept()
			if err != nil {
				return
			}
			e.tcpAccepted.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return e
}

func portOf(l net.Listener) int32 { return int32(l.Addr().(*net.TCPAddr).Port) }

// egressNetwork is an EgressNetwork in shop (the client's namespace) for
// loopback, with extra annotations.
func egressNetwork(tp v1alpha1.TrafficPolicy, annotations map[string]string) *v1alpha1.EgressNetwork {
	return &v1alpha1.EgressNetwork{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "EgressNetwork"},
		ObjectMeta: metav1.ObjectMeta{Name: "egress", Namespace: "shop", Annotations: annotations},
		Spec:       v1alpha1.EgressNetworkSpec{TrafficPolicy: tp, Networks: []v1alpha1.Network{{Cidr: "127.0.0.0/8"}}},
	}
}

// egressWorld is the policy controller, the external application and a
// proxy of a pod in shop with a mapped listener for each external port.
type egressWorld struct {
	src       *policy.MemorySource
	resolver  *dataplane.MemoryResolver
	ext       *external
	http, tcp string // the proxy's listeners for the external ports
	admin     string
}

// startEgressWorld starts it with the policy objects objs returns for the
// external application.
func startEgressWorld(t *testing.T, objs func(*external) []runtime.Object) *egressWorld {
	t.Helper()
	w := &egressWorld{ext: startExternal(t), resolver: dataplane.NewMemoryResolver()}
	var initial []runtime.Object
	if objs != nil {
		initial = objs(w.ext)
	}
	src, x := outboundIndexer(t, initial)
	w.src = src
	op, id := outboundClientOf(t, x)

	cfg := dataplane.DefaultConfig()
	cfg.DetectTimeout = 5 * time.Second
	cfg.ShutdownGracePeriod = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	// The resolver knows no external address: they are no Service's.
	p, err := dataplane.New(ctx, cfg, id, w.resolver, nil, dataplane.WithOutboundPolicies(op))
	require.NoError(t, err)
	httpL, tcpL, admin := testutil.Listen(t), testutil.Listen(t), testutil.Listen(t)
	w.http, w.tcp, w.admin = httpL.Addr().String(), tcpL.Addr().String(), admin.Addr().String()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, dataplane.Listeners{Admin: admin, Mapped: []dataplane.MappedListener{
			{Listener: httpL, Authority: w.ext.http.Addr().String()},
			{Listener: tcpL, Authority: w.ext.tcp.Addr().String()},
		}})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return w
}

// set replaces the policy objects.
func (w *egressWorld) set(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	w.src.Set(policyObjects(t, objs))
}

// get sends one request on a new connection through the proxy.
func (w *egressWorld) get(t *testing.T, path string) (int, http.Header, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + w.http + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(body)
}

// eventuallyStatus waits until a request for path is answered status (the
// policy reaches the proxy through its watch).
func (w *egressWorld) eventuallyStatus(t *testing.T, path string, status int, msg string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := w.get(t, path)
		return got == status
	}, msg)
}

// echo writes an opaque message through the proxy's TCP listener and
// reads what comes back until the connection ends: the echo when
// forwarded, nothing when refused.
func (w *egressWorld) echo(t *testing.T) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", w.tcp, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	const msg = "\x00opaque hello"
	_, err = io.WriteString(c, msg)
	require.NoError(t, err)
	got := make([]byte, len(msg))
	n, err := io.ReadFull(c, got)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the proxy neither forwarded nor closed the connection")
	return string(got[:n])
}

// only returns objs whatever the external application.
func only(objs ...runtime.Object) func(*external) []runtime.Object {
	return func(*external) []runtime.Object { return objs }
}

// opaqueTCP is an EgressNetwork whose annotation makes the external TCP
// port opaque, as Linkerd's opaque cases use an opaque port: the proxy
// does not detect.
func opaqueTCP(tp v1alpha1.TrafficPolicy) func(*external) []runtime.Object {
	return func(e *external) []runtime.Object {
		return []runtime.Object{egressNetwork(tp, map[string]string{"config.linkerd.io/opaque-ports": strconv.Itoa(int(portOf(e.tcp)))})}
	}
}

func TestLinkerdEgressNetworkEndToEnd(t *testing.T) {
	t.Run("default_traffic_policy_http_allow", func(t *testing.T) {
		w := startEgressWorld(t, only(egressNetwork(v1alpha1.TrafficPolicyAllow, nil)))
		status, _, body := w.get(t, "/get")
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "external /get", body, "the request reached the external destination")
		assert.Equal(t, int32(1), w.ext.httpHits.Load())
	})

	t.Run("default_traffic_policy_http_deny", func(t *testing.T) {
		w := startEgressWorld(t, only(egressNetwork(v1alpha1.TrafficPolicyDeny, nil)))
		status, hdr, body := w.get(t, "/get")
		assert.Equal(t, http.StatusForbidden, status, body)
		assert.Contains(t, hdr.Get("l5d-proxy-error"), "traffic not allowed", "the proxy says why, as Linkerd's does")
		assert.Zero(t, w.ext.httpHits.Load(), "nothing reached the external destination")
		routes := metrics(t, w.admin, `rt_route="http-egress-deny"`)
		assert.Contains(t, routes, `parent_kind="EgressNetwork"`, "route metrics name the parent, as Linkerd's do")
		assert.Contains(t, routes, `parent_name="egress"`)
		assert.Contains(t, routes, `parent_namespace="shop"`)
	})

	t.Run("default_traffic_policy_opaque_allow", func(t *testing.T) {
		w := startEgressWorld(t, opaqueTCP(v1alpha1.TrafficPolicyAllow))
		assert.Equal(t, "\x00opaque hello", w.echo(t), "the opaque connection is forwarded and echoed")
		assert.Equal(t, int32(1), w.ext.tcpAccepted.Load())
	})

	t.Run("default_traffic_policy_opaque_deny", func(t *testing.T) {
		w := startEgressWorld(t, opaqueTCP(v1alpha1.TrafficPolicyDeny))
		assert.Equal(t, "", w.echo(t), "the opaque connection is refused")
		assert.Equal(t, "", w.echo(t), "and again")
		assert.Zero(t, w.ext.tcpAccepted.Load(), "a refused connection never reaches the destination")
		assert.Contains(t, metrics(t, w.admin, "tcp_refused_total"), `reason="forbidden"`, "the refusal is counted")
	})

	t.Run("explicit_allow_http_route", func(t *testing.T) {
		w := startEgressWorld(t, only(egressNetwork(v1alpha1.TrafficPolicyDeny, nil)))
		status, _, _ := w.get(t, "/get")
		require.Equal(t, http.StatusForbidden, status, "blocked before the route exists")

		w.set(t, egressNetwork(v1alpha1.TrafficPolicyDeny, nil), exactRoute("http-route", "egress", portOf(w.ext.http), "/get"))
		w.eventuallyStatus(t, "/get", http.StatusOK, "the route allows /get")
		_, _, body := w.get(t, "/get")
		assert.Equal(t, "external /get", body)
		hits := w.ext.httpHits.Load()
		status, _, _ = w.get(t, "/ip")
		assert.Equal(t, http.StatusForbidden, status, "the default route still refuses /ip")
		assert.Equal(t, hits, w.ext.httpHits.Load(), "/ip never reached the destination")
	})

	t.Run("routing_back_to_cluster_http_route", func(t *testing.T) {
		// An application in the cluster (Service api, whose endpoint the
		// resolver knows) receives what a route of the EgressNetwork
		// sends back into the cluster.
		inCluster := testutil.Listen(t)
		srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(rw, "in-cluster %s", r.URL.Path)
		}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(inCluster) }()
		t.Cleanup(func() { _ = srv.Close() })
		api := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "shop"},
			Spec:       corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		w := startEgressWorld(t, func(e *external) []runtime.Object {
			return []runtime.Object{egressNetwork(v1alpha1.TrafficPolicyAllow, nil), api, backToCluster("to-api", "egress", portOf(e.http), "/internal", "api", 8080)}
		})
		w.resolver.Set("api.shop.svc.cluster.local:8080", dataplane.Endpoint{Addr: netip.MustParseAddrPort(inCluster.Addr().String())})

		status, _, body := w.get(t, "/internal/x")
		assert.Equal(t, http.StatusOK, status)
		assert.Equal(t, "in-cluster /internal/x", body, "the route sends the request back into the cluster")
		assert.Zero(t, w.ext.httpHits.Load(), "the external destination did not see it")
		_, _, body = w.get(t, "/elsewhere")
		assert.Equal(t, "external /elsewhere", body, "the rest goes out, under Allow")
	})
}

// backToCluster is an HTTPRoute of the EgressNetwork parent (on port)
// sending paths under prefix to the Service svc.
func backToCluster(name, parent string, port int32, prefix, svc string, svcPort int32) *gatewayv1.HTTPRoute {
	r := exactRoute(name, parent, port, prefix)
	pfx := gatewayv1.PathMatchPathPrefix
	r.Spec.Rules[0].Matches[0].Path.Type = &pfx
	p := gatewayv1.PortNumber(svcPort)
	r.Spec.Rules[0].BackendRefs = []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(svc), Port: &p}}}}
	return r
}

// TestAnEgressNetworkTurnedToDenyRefusesTheNextRequestsAndItsDeletionForwardsAgain
// follows one proxy through the changes: no EgressNetwork (the fallback
// forwards), Allow, Deny, deleted.
func TestAnEgressNetworkTurnedToDenyRefusesTheNextRequestsAndItsDeletionForwardsAgain(t *testing.T) {
	w := startEgressWorld(t, nil)
	status, _, _ := w.get(t, "/a")
	require.Equal(t, http.StatusOK, status, "no EgressNetwork: forwarded")
	assert.Equal(t, "\x00opaque hello", w.echo(t))

	w.set(t, egressNetwork(v1alpha1.TrafficPolicyAllow, nil))
	status, _, _ = w.get(t, "/b")
	assert.Equal(t, http.StatusOK, status, "Allow forwards")

	w.set(t, egressNetwork(v1alpha1.TrafficPolicyDeny, nil))
	w.eventuallyStatus(t, "/c", http.StatusForbidden, "Deny reaches the proxy")
	// Detected as opaque, the connection meets the Deny policy's opaque
	// route, which forbids it (the TCP port's own watch follows).
	testutil.Eventually(t, 10*time.Second, func() bool { return w.echo(t) == "" }, "opaque traffic is refused too")

	w.set(t)
	w.eventuallyStatus(t, "/d", http.StatusOK, "without the EgressNetwork the fallback forwards again")
	testutil.Eventually(t, 10*time.Second, func() bool { return w.echo(t) == "\x00opaque hello" }, "and opaque traffic too")
}

func exactRoute(name, parent string, port int32, path string) *gatewayv1.HTTPRoute {
	g, k := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork")
	p := gatewayv1.PortNumber(port)
	exact := gatewayv1.PathMatchExact
	return &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(parent), Port: &p}}},
			Rules:           []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: &path}}}}},
		},
	}
}

// metrics returns the lines of the proxy's /metrics that contain want.
func metrics(t *testing.T, admin, want string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, want) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// outboundClientOf serves x's outbound policies on loopback and returns
// their client, as shop/web-0's proxy asks, and that proxy's identity
// (web.shop, under a fresh trust anchor).
func outboundClientOf(t *testing.T, x *policy.Indexer) (*control.OutboundPolicies, *dataplane.StaticIdentity) {
	t.Helper()
	return outboundClientIn(t, x, "shop")
}

// outboundClientIn is outboundClientOf for the proxy of pod web-0 in
// namespace ns (its context token names ns); the identity stays web.shop's.
func outboundClientIn(t *testing.T, x *policy.Indexer, ns string) (*control.OutboundPolicies, *dataplane.StaticIdentity) {
	t.Helper()
	lis := testutil.Listen(t)
	s := startOutbound(t, x, lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	op, err := control.NewOutboundPolicies(cc, control.Workload(ns, "web-0"))
	require.NoError(t, err)

	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	const name = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	leaf := issuer.Leaf(t, testutil.CertOptions{Name: name})
	id, err := dataplane.NewStaticIdentity(name, leaf.TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	return op, id
}
