package sourcetest

import (
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tlsroute"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

// Linkerd's test cases of TCPRoute and TLSRoute (linkerd2 tag
// version-2.20), under their names, grouped by the file they come from:
//
//   - outbound_api: policy-test's outbound_api.rs cases that Linkerd runs
//     for TLSRoute and TCPRoute, each for the parents Linkerd runs it for
//     (subtests <parent>_<route>). Linkerd waits for the route's Accepted
//     status before reading the policy; Weft serves a route without it.
//   - outbound_api_tcp: multiple_tcp_routes.
//   - outbound_api_app_protocol: opaque_parent_with_tcp_route.
//   - tcp, tls: backend_service and backend_egress_network of the index
//     tests (outbound/tests/routes/{tcp,tls}.rs), on a real Watch stream.
//   - admit_tcp_route, admit_tls_route: the admission cases (the webhook
//     answers with policy.Validate, and a source ignores what it
//     refuses).
//
// The HTTPRoute and GRPCRoute runs of the outbound_api cases, and
// consumer_route for every route kind, are in linkerd_outbound_routes.go,
// under the same case names.

// The parent port and the backend port of Linkerd's cases.
const (
	streamPort        = 4191
	streamOtherPort   = 9999
	streamBackendPort = 8888
)

// StreamService is a Service in ns with ports (no appProtocol).
func StreamService(ns, name string, ports ...int32) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "p" + strconv.Itoa(int(p)), Port: p})
	}
	return s
}

// StreamParentRef names a parent of kind ("Service" or "EgressNetwork")
// in NS, on port (0: no port).
func StreamParentRef(kind, name string, port int32) gatewayv1.ParentReference {
	g := gatewayv1.Group("core")
	if kind == "EgressNetwork" {
		g = "policy.linkerd.io"
	}
	k := gatewayv1.Kind(kind)
	pr := gatewayv1.ParentReference{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(name)}
	if port != 0 {
		p := gatewayv1.PortNumber(port)
		pr.Port = &p
	}
	return pr
}

// ServiceBackend is a backendRef to Service ns/name on port.
func ServiceBackend(ns, name string, port int32) gatewayv1.BackendRef {
	p := gatewayv1.PortNumber(port)
	n := gatewayv1.Namespace(ns)
	return gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Namespace: &n, Port: &p}}
}

// Weighted sets a backendRef's weight.
func Weighted(b gatewayv1.BackendRef, w int32) gatewayv1.BackendRef {
	b.Weight = &w
	return b
}

// TCPRoute is a v1alpha2 TCPRoute in NS (as Linkerd's manifests write
// it) with one rule sending to backends.
func TCPRoute(name string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) *gatewayv1alpha2.TCPRoute {
	return &gatewayv1alpha2.TCPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1alpha2", Kind: "TCPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Spec: gatewayv1alpha2.TCPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
			Rules:           []gatewayv1alpha2.TCPRouteRule{{BackendRefs: backends}},
		},
	}
}

// TLSRoute is a v1alpha2 TLSRoute in NS for the SNIs hostnames, with one
// rule sending to backends.
func TLSRoute(name string, hostnames []string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) *gatewayv1alpha2.TLSRoute {
	r := &gatewayv1alpha2.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1alpha2", Kind: "TLSRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
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

// streamParent is one kind of parent Linkerd's cases run for.
type streamParent struct {
	kind string
	// objs are the parent (and, for a Service, the backend Service).
	objs []runtime.Object
	// target is the parent's port streamPort as a proxy asks for it.
	target func(port uint16) policy.OutboundTarget
	// backend is the route's backendRef named name (a Service, or for an
	// EgressNetwork an EgressNetwork, as Linkerd's make_backend), and
	// backendMeta what the policy must say about it.
	backend     func(name string) gatewayv1.BackendRef
	backendMeta func(name string) *meta.Metadata
	// defaultRoute names the route the parent adds after the stream
	// routes of a Tls protocol ("" for none).
	defaultRoute string
}

func streamParents() []streamParent {
	return []streamParent{
		{
			kind: "Service",
			objs: []runtime.Object{StreamService(NS, "parent", streamPort, streamOtherPort), StreamService(NS, "backend", streamBackendPort)},
			target: func(port uint16) policy.OutboundTarget {
				return policy.OutboundTarget{Namespace: NS, Name: "parent", Port: port}
			},
			backend: func(name string) gatewayv1.BackendRef { return ServiceBackend(NS, name, streamBackendPort) },
			backendMeta: func(name string) *meta.Metadata {
				return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "core", Kind: "Service", Namespace: NS, Name: name, Port: streamBackendPort}}}
			},
		},
		{
			kind: "EgressNetwork",
			objs: []runtime.Object{EgressNetwork(NS, "parent", v1alpha1.TrafficPolicyAllow)},
			target: func(port uint16) policy.OutboundTarget {
				return policy.OutboundTarget{Addr: netip.AddrPortFrom(netip.MustParseAddr("1.1.1.1"), port), SourceNamespace: NS}
			},
			backend: func(name string) gatewayv1.BackendRef {
				b := egressBackend(name)
				p := gatewayv1.PortNumber(streamBackendPort)
				b.Port = &p
				return b
			},
			backendMeta:  func(name string) *meta.Metadata { return egressMD(NS, name, streamBackendPort) },
			defaultRoute: "tls-egress-allow",
		},
	}
}

// streamRouteKind builds one route kind's routes for the cases.
type streamRouteKind struct {
	kind string
	make func(name string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) runtime.Object
}

var streamRouteKinds = []streamRouteKind{
	{kind: "TLSRoute", make: func(name string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) runtime.Object {
		return TLSRoute(name, []string{"backend.example.com"}, parent, backends...)
	}},
	{kind: "TCPRoute", make: func(name string, parent gatewayv1.ParentReference, backends ...gatewayv1.BackendRef) runtime.Object {
		return TCPRoute(name, parent, backends...)
	}},
}

// streamView is a TlsRoute or OpaqueRoute as the cases read it.
type streamView struct {
	meta     *meta.Metadata
	snis     []*tlsroute.SniMatch
	first    []*outbound.Backend // FirstAvailable backends
	weighted []streamViewBackend // RandomAvailable backends
	forbid   bool                // the rule's Forbidden filter
}

type streamViewBackend struct {
	weight  uint32
	backend *outbound.Backend
	// invalid is the message of the backend's Invalid filter, if any;
	// filters counts its filters.
	invalid string
	filters int
}

// streamRoutesOf returns the protocol ("tls", "opaque" or another
// protocol's name) and its stream routes.
func streamRoutesOf(p *outbound.OutboundPolicy) (string, []streamView) {
	var out []streamView
	switch {
	case p.GetProtocol().GetTls() != nil:
		for _, r := range p.GetProtocol().GetTls().GetRoutes() {
			v := streamView{meta: r.GetMetadata(), snis: r.GetSnis()}
			for _, rule := range r.GetRules() {
				for _, f := range rule.GetFilters() {
					v.forbid = v.forbid || f.GetForbidden() != nil
				}
				for _, b := range rule.GetBackends().GetFirstAvailable().GetBackends() {
					v.first = append(v.first, b.GetBackend())
				}
				for _, wb := range rule.GetBackends().GetRandomAvailable().GetBackends() {
					vb := streamViewBackend{weight: wb.GetWeight(), backend: wb.GetBackend().GetBackend(), filters: len(wb.GetBackend().GetFilters())}
					for _, f := range wb.GetBackend().GetFilters() {
						if f.GetInvalid() != nil {
							vb.invalid = f.GetInvalid().GetMessage()
						}
					}
					v.weighted = append(v.weighted, vb)
				}
			}
			out = append(out, v)
		}
		return "tls", out
	case p.GetProtocol().GetOpaque() != nil:
		for _, r := range p.GetProtocol().GetOpaque().GetRoutes() {
			v := streamView{meta: r.GetMetadata()}
			for _, rule := range r.GetRules() {
				for _, f := range rule.GetFilters() {
					v.forbid = v.forbid || f.GetForbidden() != nil
				}
				for _, b := range rule.GetBackends().GetFirstAvailable().GetBackends() {
					v.first = append(v.first, b.GetBackend())
				}
				for _, wb := range rule.GetBackends().GetRandomAvailable().GetBackends() {
					vb := streamViewBackend{weight: wb.GetWeight(), backend: wb.GetBackend().GetBackend(), filters: len(wb.GetBackend().GetFilters())}
					for _, f := range wb.GetBackend().GetFilters() {
						if f.GetInvalid() != nil {
							vb.invalid = f.GetInvalid().GetMessage()
						}
					}
					v.weighted = append(v.weighted, vb)
				}
			}
			out = append(out, v)
		}
		return "opaque", out
	case p.GetProtocol().GetDetect() != nil:
		return "detect", nil
	}
	return "other", nil
}

func routeMD(kind, name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "gateway.networking.k8s.io", Kind: kind, Namespace: NS, Name: name}}}
}

func protocolFor(kind string) string {
	if kind == "TLSRoute" {
		return "tls"
	}
	return "opaque"
}

// routeNames lists the routes' names (resource name or default name).
func routeNames(rs []streamView) []string {
	var out []string
	for _, r := range rs {
		if res := r.meta.GetResource(); res != nil {
			out = append(out, res.GetName())
		} else {
			out = append(out, r.meta.GetDefault())
		}
	}
	return out
}

// streamPolicy polls the index until the policy of target has the
// protocol want with n stream routes, and returns it.
func streamPolicy(t *testing.T, x *policy.Indexer, target policy.OutboundTarget, want string, n int, msg string) []streamView {
	t.Helper()
	var routes []streamView
	var got string
	testutil.Eventually(t, 5*time.Second, func() bool {
		p, err := x.Index().OutboundPolicy(target)
		if err != nil {
			return false
		}
		got, routes = streamRoutesOf(p)
		return got == want && len(routes) == n
	}, msg)
	return routes
}

// watchTarget opens a Watch of target on behalf of a pod in srcNS.
func watchTarget(t *testing.T, client outbound.OutboundPoliciesClient, srcNS string, target policy.OutboundTarget) grpc.ServerStreamingClient[outbound.OutboundPolicy] {
	t.Helper()
	ctx := testutil.Context(t, 20*time.Second)
	var spec *outbound.TrafficSpec
	if target.Addr.IsValid() {
		spec = addrSpec(srcNS, target.Addr)
	} else {
		spec = &outbound.TrafficSpec{SourceWorkload: srcNS + ":client-0", Target: &outbound.TrafficSpec_Authority{
			Authority: target.Name + "." + target.Namespace + ".svc.cluster.local:" + strconv.Itoa(int(target.Port))}}
	}
	stream, err := client.Watch(ctx, spec)
	require.NoError(t, err)
	return stream
}

// recvUntil reads policies from stream until cond holds for one, and
// returns its routes.
func recvUntil(t *testing.T, stream grpc.ServerStreamingClient[outbound.OutboundPolicy], cond func(string, []streamView) bool, msg string) []streamView {
	t.Helper()
	for {
		p, err := stream.Recv()
		require.NoError(t, err, msg)
		if proto, routes := streamRoutesOf(p); cond(proto, routes) {
			return routes
		}
	}
}

func runLinkerdStreamRoutes(t *testing.T, newHarness Factory) {
	// each runs a case for every parent and route kind in kinds.
	each := func(t *testing.T, parents []string, kinds []string, run func(t *testing.T, sp streamParent, rk streamRouteKind)) {
		for _, sp := range streamParents() {
			for _, rk := range streamRouteKinds {
				if !contains(parents, sp.kind) || !contains(kinds, rk.kind) {
					continue
				}
				t.Run(sp.kind+"_"+rk.kind, func(t *testing.T) { run(t, sp, rk) })
			}
		}
	}
	both := []string{"Service", "EgressNetwork"}
	routeKinds := []string{"TLSRoute", "TCPRoute"}
	start := func(t *testing.T, sp streamParent, objs ...runtime.Object) *policy.Indexer {
		t.Helper()
		h := newHarness(t, with(with(Base(), sp.objs...), objs...)...)
		return running(t, h.Source())
	}
	// wantRoutes is what a Tls protocol lists after the routes named.
	wantRoutes := func(sp streamParent, rk streamRouteKind, names ...string) []string {
		if rk.kind == "TLSRoute" && sp.defaultRoute != "" {
			return append(names, sp.defaultRoute)
		}
		return names
	}

	t.Run("outbound_api", func(t *testing.T) {
		t.Run("routes_with_backend", func(t *testing.T) {
			each(t, both, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				x := start(t, sp, rk.make("route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp))))
				names := wantRoutes(sp, rk, "route")
				routes := streamPolicy(t, x, sp.target(streamPort), protocolFor(rk.kind), len(names), "the route is served")
				assert.Equal(t, names, routeNames(routes))
				r := routes[0]
				assert.True(t, proto.Equal(routeMD(rk.kind, "route"), r.meta), "route metadata: %v", r.meta)
				require.Len(t, r.weighted, 1, "one weighted backend")
				b := r.weighted[0]
				assert.Zero(t, b.filters, "a backend that exists has no filter")
				assert.True(t, proto.Equal(sp.backendMeta(backendName(sp)), b.backend.GetMetadata()), "backend metadata: %v", b.backend.GetMetadata())
				if sp.kind == "Service" {
					assert.Equal(t, "backend."+NS+".svc.cluster.local:8888", b.backend.GetBalancer().GetDiscovery().GetDst().GetPath())
				} else {
					assert.Equal(t, uint32(0x01010101), b.backend.GetForward().GetAddr().GetIp().GetIpv4(), "the EgressNetwork forwards to the original destination")
					assert.Equal(t, uint32(streamPort), b.backend.GetForward().GetAddr().GetPort())
				}
				if rk.kind == "TLSRoute" {
					require.Len(t, r.snis, 1)
					assert.Equal(t, "backend.example.com", r.snis[0].GetExact())
				}
			})
		})
		t.Run("service_with_routes_with_cross_namespace_backend", func(t *testing.T) {
			each(t, []string{"Service"}, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				x := start(t, sp, StreamService("other-ns", "backend", streamBackendPort),
					rk.make("route", StreamParentRef(sp.kind, "parent", streamPort), ServiceBackend("other-ns", "backend", streamBackendPort)))
				routes := streamPolicy(t, x, sp.target(streamPort), protocolFor(rk.kind), 1, "the route is served")
				require.Len(t, routes[0].weighted, 1)
				b := routes[0].weighted[0]
				assert.Zero(t, b.filters, "the Service in the other namespace exists")
				assert.Equal(t, "backend.other-ns.svc.cluster.local:8888", b.backend.GetBalancer().GetDiscovery().GetDst().GetPath())
				assert.Equal(t, "other-ns", b.backend.GetMetadata().GetResource().GetNamespace())
			})
			runLinkerdOutboundRouteCase(t, newHarness, "service_with_routes_with_cross_namespace_backend")
		})
		t.Run("routes_with_invalid_backend", func(t *testing.T) {
			each(t, both, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				x := start(t, sp, rk.make("route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend("invalid")))
				routes := streamPolicy(t, x, sp.target(streamPort), protocolFor(rk.kind), len(wantRoutes(sp, rk, "route")), "the route is served")
				require.Len(t, routes[0].weighted, 1)
				b := routes[0].weighted[0]
				assert.Equal(t, 1, b.filters, "one filter")
				assert.NotEmpty(t, b.invalid, "an Invalid filter with its reason")
				assert.True(t, proto.Equal(sp.backendMeta("invalid"), b.backend.GetMetadata()), "the backend still names what the route named: %v", b.backend.GetMetadata())
				assert.Nil(t, b.backend.GetKind(), "nothing to connect to")
			})
		})
		t.Run("multiple_routes", func(t *testing.T) {
			each(t, both, []string{"TLSRoute"}, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				// Same creation time: the names order them.
				x := start(t, sp,
					rk.make("b-route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp))),
					rk.make("a-route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp))))
				names := wantRoutes(sp, rk, "a-route", "b-route")
				routes := streamPolicy(t, x, sp.target(streamPort), "tls", len(names), "both routes are served")
				assert.Equal(t, names, routeNames(routes))
			})
		})
		t.Run("route_with_no_port", func(t *testing.T) {
			each(t, []string{"Service"}, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				x := start(t, sp, rk.make("route", StreamParentRef(sp.kind, "parent", 0), sp.backend(backendName(sp))))
				for _, port := range []uint16{streamPort, streamOtherPort} {
					routes := streamPolicy(t, x, sp.target(port), protocolFor(rk.kind), 1, "the route applies to every port")
					assert.Equal(t, []string{"route"}, routeNames(routes), "port %d", port)
				}
			})
		})
		producer := func(t *testing.T, sp streamParent, rk streamRouteKind, before bool) {
			route := rk.make("route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp)))
			initial := with(Base(), sp.objs...)
			if before {
				initial = append(initial, route)
			}
			h := newHarness(t, initial...)
			x := running(t, h.Source())
			// The client is in another namespace than the route and its
			// Service: a producer route applies to every client.
			stream := watchTarget(t, serveOutbound(t, x), "consumer-ns", sp.target(streamPort))
			if !before {
				recvUntil(t, stream, func(p string, _ []streamView) bool { return p == "detect" }, "without the route: the default HTTP detection")
				h.Set(t, append(initial, route)...)
			}
			routes := recvUntil(t, stream, func(p string, rs []streamView) bool { return p == protocolFor(rk.kind) }, "the producer route")
			assert.Equal(t, []string{"route"}, routeNames(routes))
		}
		t.Run("producer_route", func(t *testing.T) {
			each(t, []string{"Service"}, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) { producer(t, sp, rk, false) })
			runLinkerdOutboundRouteCase(t, newHarness, "producer_route")
		})
		t.Run("pre_existing_producer_route", func(t *testing.T) {
			each(t, []string{"Service"}, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) { producer(t, sp, rk, true) })
			runLinkerdOutboundRouteCase(t, newHarness, "pre_existing_producer_route")
		})
		t.Run("consumer_route", func(t *testing.T) {
			runLinkerdOutboundRouteCase(t, newHarness, "consumer_route")
		})
		t.Run("route_with_no_rules", func(t *testing.T) {
			runLinkerdOutboundRouteCase(t, newHarness, "route_with_no_rules")
		})
		t.Run("routes_without_backends", func(t *testing.T) {
			runLinkerdOutboundRouteCase(t, newHarness, "routes_without_backends")
		})
		t.Run("route_reattachment", func(t *testing.T) {
			each(t, both, routeKinds, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				attached := rk.make("route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp)))
				detached := rk.make("route", StreamParentRef(sp.kind, "other", streamPort), sp.backend(backendName(sp)))
				base := with(Base(), sp.objs...)
				h := newHarness(t, append(base, attached)...)
				x := running(t, h.Source())
				stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
				isAttached := func(p string, rs []streamView) bool {
					return p == protocolFor(rk.kind) && len(rs) > 0 && routeNames(rs)[0] == "route"
				}
				recvUntil(t, stream, isAttached, "the route is attached")
				h.Set(t, append(base, detached)...)
				recvUntil(t, stream, func(p string, _ []streamView) bool { return p == "detect" }, "detached: the default HTTP detection again")
				h.Set(t, append(base, attached)...)
				recvUntil(t, stream, isAttached, "attached again")
			})
			runLinkerdOutboundRouteCase(t, newHarness, "route_reattachment")
		})
	})

	t.Run("outbound_api_tcp", func(t *testing.T) {
		t.Run("multiple_tcp_routes", func(t *testing.T) {
			each(t, both, []string{"TCPRoute"}, func(t *testing.T, sp streamParent, rk streamRouteKind) {
				a := TCPRoute("a-route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp)))
				b := TCPRoute("b-route", StreamParentRef(sp.kind, "parent", streamPort), sp.backend(backendName(sp)))
				b.CreationTimestamp = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
				a.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
				base := with(Base(), sp.objs...)
				h := newHarness(t, base...)
				x := running(t, h.Source())
				stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
				recvUntil(t, stream, func(p string, _ []streamView) bool { return p == "detect" }, "no route yet: the default HTTP detection")
				h.Set(t, append(base, a)...)
				recvUntil(t, stream, func(p string, rs []streamView) bool {
					return p == "opaque" && len(rs) == 1 && routeNames(rs)[0] == "a-route"
				}, "a-route")
				// A probe route on another Service, set after b-route:
				// once it is served, b-route is indexed too.
				probe := TCPRoute("probe", StreamParentRef("Service", "probe", streamPort))
				h.Set(t, append(base, a, b, StreamService(NS, "probe", streamPort), probe)...)
				streamPolicy(t, x, policy.OutboundTarget{Namespace: NS, Name: "probe", Port: streamPort}, "opaque", 1, "the probe route is indexed")
				routes := streamPolicy(t, x, sp.target(streamPort), "opaque", 1, "one TCPRoute is served")
				assert.Equal(t, []string{"a-route"}, routeNames(routes), "only the oldest TCPRoute")
				// Without a-route, b-route is served: it was only left
				// out by the limit.
				h.Set(t, append(base, b)...)
				recvUntil(t, stream, func(p string, rs []streamView) bool {
					return p == "opaque" && len(rs) == 1 && routeNames(rs)[0] == "b-route"
				}, "b-route once a-route is gone")
			})
		})
	})

	t.Run("outbound_api_app_protocol", func(t *testing.T) {
		t.Run("opaque_parent_with_tcp_route", func(t *testing.T) {
			parent := StreamService(NS, "parent", streamPort)
			opaque := "linkerd.io/opaque"
			parent.Spec.Ports[0].AppProtocol = &opaque
			h := newHarness(t, with(Base(), parent, StreamService(NS, "backend", streamBackendPort),
				TCPRoute("route", StreamParentRef("Service", "parent", streamPort), ServiceBackend(NS, "backend", streamBackendPort)))...)
			x := running(t, h.Source())
			routes := streamPolicy(t, x, policy.OutboundTarget{Namespace: NS, Name: "parent", Port: streamPort}, "opaque", 1, "the TCPRoute is served")
			assert.Equal(t, []string{"route"}, routeNames(routes), "the TCPRoute replaces the default opaque route")
			require.Len(t, routes[0].weighted, 1)
			assert.Equal(t, "backend."+NS+".svc.cluster.local:8888", routes[0].weighted[0].backend.GetBalancer().GetDiscovery().GetDst().GetPath())
		})
		t.Run("WeftAnOpaquePortIgnoresTLSRoutes", func(t *testing.T) {
			// Linkerd's controller reads TLSRoutes only on a port without
			// appProtocol; an opaque port keeps its default route.
			parent := StreamService(NS, "parent", streamPort)
			opaque := "linkerd.io/opaque"
			parent.Spec.Ports[0].AppProtocol = &opaque
			h := newHarness(t, with(Base(), parent,
				TLSRoute("route", nil, StreamParentRef("Service", "parent", streamPort)), TCPRoute("probe", StreamParentRef("Service", "probe", streamPort)), StreamService(NS, "probe", streamPort))...)
			x := running(t, h.Source())
			streamPolicy(t, x, policy.OutboundTarget{Namespace: NS, Name: "probe", Port: streamPort}, "opaque", 1, "the routes are indexed")
			routes := streamPolicy(t, x, policy.OutboundTarget{Namespace: NS, Name: "parent", Port: streamPort}, "opaque", 1, "the opaque port")
			assert.Equal(t, []string{"opaq"}, routeNames(routes))
		})
	})

	for _, rk := range streamRouteKinds {
		group := "tcp"
		if rk.kind == "TLSRoute" {
			group = "tls"
		}
		t.Run(group, func(t *testing.T) {
			t.Run("backend_service", func(t *testing.T) {
				apex := StreamService(NS, "apex", 8080)
				route := rk.make("route", StreamParentRef("Service", "apex", 8080), ServiceBackend(NS, "backend", 8080))
				base := with(Base(), apex, route)
				h := newHarness(t, base...)
				x := running(t, h.Source())
				stream := watchTarget(t, serveOutbound(t, x), NS, policy.OutboundTarget{Namespace: NS, Name: "apex", Port: 8080})
				routes := recvUntil(t, stream, func(p string, rs []streamView) bool { return p == protocolFor(rk.kind) }, "the route")
				require.Len(t, routes[0].weighted, 1)
				assert.NotEmpty(t, routes[0].weighted[0].invalid, "the backend Service does not exist yet")
				h.Set(t, append(base, StreamService(NS, "backend", 8080))...)
				routes = recvUntil(t, stream, func(p string, rs []streamView) bool {
					return p == protocolFor(rk.kind) && len(rs) == 1 && len(rs[0].weighted) == 1 && rs[0].weighted[0].invalid == ""
				}, "the backend Service exists")
				assert.Equal(t, "backend."+NS+".svc.cluster.local:8080", routes[0].weighted[0].backend.GetBalancer().GetDiscovery().GetDst().GetPath())
			})
			t.Run("backend_egress_network", func(t *testing.T) {
				apex := EgressNetwork(NS, "apex", v1alpha1.TrafficPolicyAllow)
				b := egressBackend("apex")
				h := newHarness(t, with(Base(), apex, rk.make("route", StreamParentRef("EgressNetwork", "apex", 8080), b))...)
				x := running(t, h.Source())
				target := policy.OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:8080"), SourceNamespace: NS}
				n := 1
				if rk.kind == "TLSRoute" {
					n = 2
				}
				routes := streamPolicy(t, x, target, protocolFor(rk.kind), n, "the route is served")
				require.Len(t, routes[0].weighted, 1)
				wb := routes[0].weighted[0]
				assert.Empty(t, wb.invalid)
				assert.True(t, proto.Equal(egressMD(NS, "apex", 8080), wb.backend.GetMetadata()), "%v", wb.backend.GetMetadata())
				assert.Equal(t, uint32(0x01010101), wb.backend.GetForward().GetAddr().GetIp().GetIpv4())
				assert.Equal(t, uint32(8080), wb.backend.GetForward().GetAddr().GetPort())
			})
		})
	}

	admission := func(t *testing.T, route runtime.Object, wantField string) {
		t.Helper()
		problems := policy.Validate(route, nil)
		if wantField == "" {
			assert.Empty(t, problems)
		} else if assert.NotEmpty(t, problems, "refused") {
			assert.Equal(t, wantField, problems[0].Field, "%v", problems)
		}
		h := newHarness(t, with(Base(), EgressNetwork(NS, "my-egress-net", v1alpha1.TrafficPolicyAllow), route)...)
		x := running(t, h.Source())
		target := policy.OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:555"), SourceNamespace: NS}
		if wantField == "" {
			streamPolicy(t, x, target, "opaque", 1, "an accepted route is served")
			return
		}
		eventuallyTrue(t, func() bool { return hasProblem(x, "error: ", "test", wantField) }, "the source reports the refused route")
		p, err := x.Index().OutboundPolicy(target)
		require.NoError(t, err)
		got, _ := streamRoutesOf(p)
		assert.Equal(t, "detect", got, "a refused route is not served")
	}
	for _, rk := range streamRouteKinds {
		file := "admit_tcp_route"
		if rk.kind == "TLSRoute" {
			file = "admit_tls_route"
		}
		mk := func(port int32, rules int) runtime.Object {
			r := rk.make("test", StreamParentRef("EgressNetwork", "my-egress-net", port), egressBackend("my-egress-net"))
			switch v := r.(type) {
			case *gatewayv1alpha2.TCPRoute:
				for len(v.Spec.Rules) < rules {
					v.Spec.Rules = append(v.Spec.Rules, v.Spec.Rules[0])
				}
			case *gatewayv1alpha2.TLSRoute:
				v.Spec.Hostnames = nil
				for len(v.Spec.Rules) < rules {
					v.Spec.Rules = append(v.Spec.Rules, v.Spec.Rules[0])
				}
			}
			return r
		}
		t.Run(file, func(t *testing.T) {
			t.Run("accepts_valid_egress_network", func(t *testing.T) {
				r := mk(555, 1)
				if rk.kind == "TLSRoute" {
					// A TLSRoute alone on a port becomes the Tls
					// protocol; a TCPRoute beside it makes the port's
					// protocol the case's probe.
					admissionTLS(t, newHarness, r)
					return
				}
				admission(t, r, "")
			})
			t.Run("rejects_egress_network_parent_with_no_port", func(t *testing.T) {
				admission(t, mk(0, 1), "spec.parentRefs[0].port")
			})
			t.Run("rejects_if_more_than_one_rule", func(t *testing.T) {
				admission(t, mk(555, 2), "spec.rules")
			})
		})
	}
}

// admissionTLS checks that an accepted TLSRoute is served (as the Tls
// protocol, with the EgressNetwork's default route after it).
func admissionTLS(t *testing.T, newHarness Factory, route runtime.Object) {
	t.Helper()
	assert.Empty(t, policy.Validate(route, nil))
	h := newHarness(t, with(Base(), EgressNetwork(NS, "my-egress-net", v1alpha1.TrafficPolicyAllow), route)...)
	x := running(t, h.Source())
	target := policy.OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:555"), SourceNamespace: NS}
	routes := streamPolicy(t, x, target, "tls", 2, "an accepted route is served")
	assert.Equal(t, []string{"test", "tls-egress-allow"}, routeNames(routes))
}

// backendName is the name of the backend Linkerd's cases send to: the
// backend Service, or the EgressNetwork parent itself.
func backendName(sp streamParent) string {
	if sp.kind == "EgressNetwork" {
		return "parent"
	}
	return "backend"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
