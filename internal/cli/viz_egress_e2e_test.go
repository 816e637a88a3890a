package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/viz"
)

// egressProxy is a real proxy of pod shop/web-0 whose outbound policy
// comes from a real policy controller (index and Outbound API over
// gRPC) holding EgressNetwork internet (Deny, for 127.0.0.0/8) with an
// HTTPRoute allowing GET /get; an HTTP server on loopback stands in for a
// host on the Internet, reached through an explicit-mode listener of the
// proxy mapped to its address.
type egressProxy struct {
	admin, listen, external string
	hits                    atomic.Int64
}

func startEgressProxy(t *testing.T) *egressProxy {
	t.Helper()
	e := &egressProxy{}
	ext := testutil.Listen(t)
	e.external = ext.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.hits.Add(1)
		fmt.Fprintf(w, "external %s", r.URL.Path)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ext) }()
	t.Cleanup(func() { _ = srv.Close() })

	g, k := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork")
	port := gatewayv1.PortNumber(ext.Addr().(*net.TCPAddr).Port)
	exact, path := gatewayv1.PathMatchExact, "/get"
	objs := []runtime.Object{
		&v1alpha1.EgressNetwork{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "EgressNetwork"},
			ObjectMeta: metav1.ObjectMeta{Name: "internet", Namespace: "shop"},
			Spec:       v1alpha1.EgressNetworkSpec{TrafficPolicy: v1alpha1.TrafficPolicyDeny, Networks: []v1alpha1.Network{{Cidr: "127.0.0.0/8"}}},
		},
		&gatewayv1.HTTPRoute{
			TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
			ObjectMeta: metav1.ObjectMeta{Name: "allow-get", Namespace: "shop"},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &g, Kind: &k, Name: "internet", Port: &port}}},
				Rules:           []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: &path}}}}},
			},
		},
	}
	o := &policy.Objects{}
	for _, obj := range objs {
		require.NoError(t, o.Add(obj, policy.Location{}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(ctx, policy.NewMemorySource(o))
	require.NoError(t, err)
	indexDone := make(chan struct{})
	go func() { defer close(indexDone); _ = x.Run(ctx) }()
	out, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	out.Register(gs)
	lis := testutil.Listen(t)
	go func() { _ = gs.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	op, err := control.NewOutboundPolicies(cc, control.Workload("shop", "web-0"))
	require.NoError(t, err)

	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	const name = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	id, err := dataplane.NewStaticIdentity(name, issuer.Leaf(t, testutil.CertOptions{Name: name}).TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	cfg := dataplane.DefaultConfig()
	cfg.ShutdownGracePeriod = 2 * time.Second
	// Discovery knows no Service: the external address is no Service's.
	p, err := dataplane.New(ctx, cfg, id, dataplane.NewMemoryResolver(), nil, dataplane.WithOutboundPolicies(op))
	require.NoError(t, err)
	listen, admin := testutil.Listen(t), testutil.Listen(t)
	e.listen, e.admin = listen.Addr().String(), admin.Addr().String()
	proxyDone := make(chan struct{})
	go func() {
		defer close(proxyDone)
		_ = p.Run(ctx, dataplane.Listeners{Admin: admin, Mapped: []dataplane.MappedListener{{Listener: listen, Authority: e.external}}})
	}()
	t.Cleanup(func() {
		cancel()
		for _, done := range []chan struct{}{proxyDone, indexDone} {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Error("the proxy or the index did not stop")
			}
		}
		gs.Stop()
		_ = cc.Close()
	})
	return e
}

// get sends one request through the proxy and returns its status.
func (e *egressProxy) get(t *testing.T, path string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + e.listen + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// target is the proxy as viz reads it directly (a local mesh's way).
func (e *egressProxy) target() viz.Target {
	return viz.Target{Namespace: "shop", Pod: "web-0", WorkloadKind: "deployment", Workload: "web", ServiceAccount: "web", Admin: e.admin}
}

// sendEgressTraffic sends allowed GET /get and refused GET /ip requests
// and checks each was answered as the policy says: allowed ones reach the
// external host, refused ones never do.
func sendEgressTraffic(t *testing.T, e *egressProxy, allowed, refused int) {
	t.Helper()
	for i := 0; i < allowed; i++ {
		require.Equal(t, http.StatusOK, e.get(t, "/get"), "the route allows /get")
	}
	for i := 0; i < refused; i++ {
		require.Equal(t, http.StatusForbidden, e.get(t, "/ip"), "the Deny policy refuses the rest")
	}
	require.Equal(t, int64(allowed), e.hits.Load(), "only the allowed requests left the mesh")
}

// TestVizShowsTrafficThatLeftTheMeshUnderAnEgressNetworkFromTheProxysOwnMetrics:
// a real proxy's /metrics, read directly as in a local mesh, give `weft viz
// routes --to egressnetwork/NAME` the EgressNetwork's routes with their
// names (its HTTPRoute and the built-in http-egress-deny) and exact
// counts, and `weft viz edges` an edge to the EgressNetwork with the
// refused requests as denied.
func TestVizShowsTrafficThatLeftTheMeshUnderAnEgressNetworkFromTheProxysOwnMetrics(t *testing.T) {
	e := startEgressProxy(t)
	const allowed, refused = 7, 3
	sendEgressTraffic(t, e, allowed, refused)

	w, err := viz.Sample(testutil.Context(t, 30*time.Second), &viz.Static{List: []viz.Target{e.target()},
		Client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}, 0, nil)
	require.NoError(t, err)
	web := viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "web"}
	for _, spelling := range []string{"egressnetwork/internet", "egressnetworks/internet", "egress/internet"} {
		to, err := viz.ParseRouteTarget(spelling, "shop")
		require.NoError(t, err)
		rows := viz.Routes(w, web, &to)
		require.Len(t, rows, 2, "%s: %+v", spelling, rows)
		// Sorted by name: the built-in route, then the HTTPRoute (which
		// Weft's proxies name kind/namespace/name).
		deny, get := rows[0], rows[1]
		assert.Equal(t, "httproute/shop/allow-get", get.Route)
		assert.Equal(t, e.external, get.Authority, "the destination address")
		assert.Equal(t, "shop/internet", get.EgressNetwork)
		assert.Equal(t, float64(allowed), get.Requests())
		assert.Equal(t, 1.0, get.SuccessRate())
		assert.Equal(t, "http-egress-deny", deny.Route, "the built-in route keeps its name")
		assert.Equal(t, float64(refused), deny.Requests())
		assert.Equal(t, 0.0, deny.SuccessRate())
	}
	other, err := viz.ParseRouteTarget("egressnetwork/internet", "other")
	require.NoError(t, err)
	assert.Empty(t, viz.Routes(w, web, &other), "another namespace's EgressNetwork")

	var egress []viz.Edge
	for _, ed := range viz.Edges(w) {
		assert.NotEqual(t, "", ed.Dst.Name)
		if ed.Dst.Kind == viz.KindEgressNetwork {
			egress = append(egress, ed)
		}
	}
	require.Len(t, egress, 1, "%+v", viz.Edges(w))
	assert.Equal(t, viz.Workload{Namespace: "shop", Kind: viz.KindEgressNetwork, Name: "internet"}, egress[0].Dst)
	assert.Equal(t, "web", egress[0].Src.Name)
	assert.Equal(t, float64(allowed+refused), egress[0].Out.Requests())
	assert.Equal(t, float64(refused), egress[0].Denied)
}

// TestVizRoutesToAnEgressNetworkThroughPrometheus: the same proxy scraped
// by a real Prometheus, and the `weft viz routes` and `weft viz edges`
// commands asking it (--prometheus), as in a cluster with Linkerd's
// viz Prometheus.
func TestVizRoutesToAnEgressNetworkThroughPrometheus(t *testing.T) {
	e := startEgressProxy(t)
	prom := startPrometheusFor(t, []promScrape{{addr: e.admin, namespace: "shop", pod: "web-0", deployment: "web"}})
	const allowed, refused = 5, 2
	sendEgressTraffic(t, e, allowed, refused)
	flags := []string{"-n", "shop", "--prometheus", prom, "-o", "json", "--since-start"}

	var rt struct {
		Routes []struct {
			Authority     string  `json:"authority"`
			Route         string  `json:"route"`
			EgressNetwork string  `json:"egressNetwork"`
			Requests      float64 `json:"requests"`
			Successes     float64 `json:"successes"`
		} `json:"routes"`
	}
	testutil.Eventually(t, 60*time.Second, func() bool {
		vizJSON(t, &rt, append([]string{"routes", "deploy/web", "--to", "egressnetwork/internet"}, flags...)...)
		return len(rt.Routes) == 2 && rt.Routes[0].Requests == refused && rt.Routes[1].Requests == allowed
	}, "prometheus to have scraped every request")
	assert.Equal(t, "http-egress-deny", rt.Routes[0].Route)
	assert.Zero(t, rt.Routes[0].Successes)
	assert.Equal(t, "httproute/shop/allow-get", rt.Routes[1].Route)
	assert.Equal(t, float64(allowed), rt.Routes[1].Successes)
	for _, r := range rt.Routes {
		assert.Equal(t, e.external, r.Authority)
		assert.Equal(t, "shop/internet", r.EgressNetwork)
	}

	var ed struct {
		Edges []struct {
			Src      struct{ Name string } `json:"src"`
			Dst      struct{ Kind, Name string }
			Denied   float64 `json:"denied"`
			Requests float64 `json:"requests"`
		} `json:"edges"`
	}
	vizJSON(t, &ed, append([]string{"edges"}, flags...)...)
	require.Len(t, ed.Edges, 1, "%+v", ed)
	assert.Equal(t, "web", ed.Edges[0].Src.Name)
	assert.Equal(t, viz.KindEgressNetwork, ed.Edges[0].Dst.Kind)
	assert.Equal(t, "internet", ed.Edges[0].Dst.Name)
	assert.Equal(t, float64(allowed+refused), ed.Edges[0].Requests)
	assert.Equal(t, float64(refused), ed.Edges[0].Denied)

	// The table says it too.
	table := vizText(t, "routes", "deploy/web", "--to", "egress/internet", "-n", "shop", "--prometheus", prom, "--since-start")
	assert.Contains(t, table, "http-egress-deny")
	edges := vizText(t, "edges", "-n", "shop", "--prometheus", prom, "--since-start")
	assert.Contains(t, edges, "egressnetwork/internet")
}

// vizText runs a viz command with table output and returns its stdout.
func vizText(t *testing.T, args ...string) string {
	t.Helper()
	return vizJSON(t, nil, args...)
}
