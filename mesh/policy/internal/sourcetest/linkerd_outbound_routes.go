package sourcetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
)

// The outbound_api.rs cases (linkerd2 tag version-2.20) that Linkerd runs
// for HTTPRoute (Gateway API and policy.linkerd.io), GRPCRoute, and, for
// consumer_route, TLSRoute and TCPRoute: subtests
// outbound_api/<case>/<Parent>_<Route> beside the TLS and TCP runs of
// linkerd_streamroutes.go. PolicyHTTPRoute is Linkerd's policy::HttpRoute.
//
// A route whose parent is a Service in another namespace is a consumer
// route: Linkerd serves it only to clients whose namespace (the proxy's
// context token) is the route's, together with the Service's producer
// routes (those in its own namespace), and every other client gets the
// producer routes alone. consumer_route checks what Linkerd's case checks
// (the consumer sees the route, the producer's namespace and a third one
// see nothing new) and, to show that nothing was still on its way to
// them, adds a producer route afterwards: the next policy the producer and
// the third namespace read holds that route and not the consumer's, and
// the consumer's holds both, merged as Linkerd merges them.

// ConsumerNS and OtherNS are the client namespaces of consumer_route.
const (
	ConsumerNS = "consumer-ns"
	OtherNS    = "other-ns"
)

// routeKind makes one kind of route of the cases, in any namespace.
type routeKind struct {
	kind string
	// proto is the protocol its parent's policy takes once it is served:
	// "http", "grpc", "tls" or "opaque" (servedRoutes).
	proto string
	// make builds the route in ns with rules, each a list of backends;
	// an empty (non-nil) rules is a route that lists no rules.
	make func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object
}

func requestRouteKinds() []routeKind {
	return []routeKind{
		{kind: "HTTPRoute", proto: "http", make: func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object {
			r := &gatewayv1.HTTPRoute{
				TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}}},
			}
			for _, backends := range rules {
				rule := gatewayv1.HTTPRouteRule{}
				for _, b := range backends {
					rule.BackendRefs = append(rule.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: b})
				}
				r.Spec.Rules = append(r.Spec.Rules, rule)
			}
			return r
		}},
		{kind: "PolicyHTTPRoute", proto: "http", make: func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object {
			pr := v1beta3.ParentReference{Group: parent.Group, Kind: parent.Kind, Namespace: parent.Namespace, Name: parent.Name}
			if parent.Port != nil {
				p := int32(*parent.Port)
				pr.Port = &p
			}
			r := &v1beta3.HTTPRoute{
				TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta3", Kind: "HTTPRoute"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       v1beta3.HTTPRouteSpec{ParentRefs: []v1beta3.ParentReference{pr}},
				// Written out, a status without its required parents
				// would be refused by the strict decoder.
				Status: v1beta3.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: []gatewayv1.RouteParentStatus{}}},
			}
			for _, backends := range rules {
				rule := v1beta3.HTTPRouteRule{}
				for _, b := range backends {
					rule.BackendRefs = append(rule.BackendRefs, v1beta3.HTTPBackendRef{BackendRef: b})
				}
				r.Spec.Rules = append(r.Spec.Rules, rule)
			}
			return r
		}},
		{kind: "GRPCRoute", proto: "grpc", make: func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object {
			r := &gatewayv1.GRPCRoute{
				TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "GRPCRoute"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}}},
			}
			for _, backends := range rules {
				rule := gatewayv1.GRPCRouteRule{}
				for _, b := range backends {
					rule.BackendRefs = append(rule.BackendRefs, gatewayv1.GRPCBackendRef{BackendRef: b})
				}
				r.Spec.Rules = append(r.Spec.Rules, rule)
			}
			return r
		}},
	}
}

// connectionRouteKinds are TLSRoute and TCPRoute in any namespace (one
// rule each, as Linkerd admits them).
func connectionRouteKinds() []routeKind {
	return []routeKind{
		{kind: "TLSRoute", proto: "tls", make: func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object {
			r := TLSRoute(name, []string{"backend.example.com"}, parent, rules[0]...)
			r.Namespace = ns
			return r
		}},
		{kind: "TCPRoute", proto: "opaque", make: func(ns, name string, parent gatewayv1.ParentReference, rules ...[]gatewayv1.BackendRef) runtime.Object {
			r := TCPRoute(name, parent, rules[0]...)
			r.Namespace = ns
			return r
		}},
	}
}

// withEmptyRules turns a route into an unstructured object whose
// spec.rules is an empty list. Go's types drop an empty list when they
// are written out (omitempty), so the API server, and a file, would see
// no field at all, which the CRD defaults to one rule; Linkerd's case
// writes "rules: []", which stays empty.
func withEmptyRules(t *testing.T, o runtime.Object) runtime.Object {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{}, "spec", "rules"))
	return u
}

// parentRefIn names parent name of kind ("Service" or "EgressNetwork") in
// namespace ns on port.
func parentRefIn(kind, ns, name string, port int32) gatewayv1.ParentReference {
	pr := StreamParentRef(kind, name, port)
	n := gatewayv1.Namespace(ns)
	pr.Namespace = &n
	return pr
}

// servedBackend is one backend of a served rule.
type servedBackend struct {
	backend *outbound.Backend
	filters int
}

// servedRoute is a route of a policy as the cases read it, whatever its
// kind: its name (resource or default name) and, per rule, its backends
// (FirstAvailable or RandomAvailable alike).
type servedRoute struct {
	meta  *meta.Metadata
	name  string
	rules [][]servedBackend
}

// servedRoutes returns the protocol of a policy ("http" for HTTP
// detection, HTTP/1 and HTTP/2, "grpc", "tls", "opaque") and its routes
// (for "http", the HTTP/1 routes).
func servedRoutes(p *outbound.OutboundPolicy) (string, []servedRoute) {
	name := func(md *meta.Metadata) string {
		if r := md.GetResource(); r != nil {
			return r.GetName()
		}
		return md.GetDefault()
	}
	pp := p.GetProtocol()
	var out []servedRoute
	switch {
	case pp.GetDetect() != nil || pp.GetHttp1() != nil || pp.GetHttp2() != nil:
		routes := pp.GetDetect().GetHttp1().GetRoutes()
		if pp.GetHttp1() != nil {
			routes = pp.GetHttp1().GetRoutes()
		} else if pp.GetHttp2() != nil {
			routes = pp.GetHttp2().GetRoutes()
		}
		for _, r := range routes {
			sr := servedRoute{meta: r.GetMetadata(), name: name(r.GetMetadata())}
			for _, rule := range r.GetRules() {
				var bs []servedBackend
				for _, b := range rule.GetBackends().GetFirstAvailable().GetBackends() {
					bs = append(bs, servedBackend{backend: b.GetBackend(), filters: len(b.GetFilters())})
				}
				for _, wb := range rule.GetBackends().GetRandomAvailable().GetBackends() {
					bs = append(bs, servedBackend{backend: wb.GetBackend().GetBackend(), filters: len(wb.GetBackend().GetFilters())})
				}
				sr.rules = append(sr.rules, bs)
			}
			out = append(out, sr)
		}
		return "http", out
	case pp.GetGrpc() != nil:
		for _, r := range pp.GetGrpc().GetRoutes() {
			sr := servedRoute{meta: r.GetMetadata(), name: name(r.GetMetadata())}
			for _, rule := range r.GetRules() {
				var bs []servedBackend
				for _, b := range rule.GetBackends().GetFirstAvailable().GetBackends() {
					bs = append(bs, servedBackend{backend: b.GetBackend(), filters: len(b.GetFilters())})
				}
				for _, wb := range rule.GetBackends().GetRandomAvailable().GetBackends() {
					bs = append(bs, servedBackend{backend: wb.GetBackend().GetBackend(), filters: len(wb.GetBackend().GetFilters())})
				}
				sr.rules = append(sr.rules, bs)
			}
			out = append(out, sr)
		}
		return "grpc", out
	}
	proto, views := streamRoutesOf(p)
	for _, v := range views {
		sr := servedRoute{meta: v.meta, name: name(v.meta)}
		var bs []servedBackend
		for _, b := range v.first {
			bs = append(bs, servedBackend{backend: b})
		}
		for _, wb := range v.weighted {
			bs = append(bs, servedBackend{backend: wb.backend, filters: wb.filters})
		}
		sr.rules = [][]servedBackend{bs}
		out = append(out, sr)
	}
	return proto, out
}

func servedNames(rs []servedRoute) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.name)
	}
	return out
}

// recvServed reads policies from stream until cond holds for one, and
// returns its routes.
func recvServed(t *testing.T, stream grpc.ServerStreamingClient[outbound.OutboundPolicy], cond func(string, []servedRoute) bool, msg string) []servedRoute {
	t.Helper()
	for {
		p, err := stream.Recv()
		require.NoError(t, err, msg)
		if proto, routes := servedRoutes(p); cond(proto, routes) {
			return routes
		}
	}
}

// recvNext reads the next policy of stream.
func recvNext(t *testing.T, stream grpc.ServerStreamingClient[outbound.OutboundPolicy], msg string) (string, []servedRoute) {
	t.Helper()
	p, err := stream.Recv()
	require.NoError(t, err, msg)
	return servedRoutes(p)
}

// parentMD is the metadata of the parent's own backend on port.
func parentMD(sp streamParent, port uint32) *meta.Metadata {
	if sp.kind == "EgressNetwork" {
		return egressMD(NS, "parent", port)
	}
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "core", Kind: "Service", Namespace: NS, Name: "parent", Port: port}}}
}

// defaultNames are the routes a parent without routes serves: the
// Service's default HTTP route, or the EgressNetwork's allowing one.
func defaultNames(sp streamParent) []string {
	if sp.kind == "EgressNetwork" {
		return []string{"http-egress-allow"}
	}
	return []string{"http"}
}

// isDefault says whether a policy is the parent's policy without routes.
func isDefault(sp streamParent) func(string, []servedRoute) bool {
	return func(p string, rs []servedRoute) bool {
		return p == "http" && assert.ObjectsAreEqual(defaultNames(sp), servedNames(rs))
	}
}

// firstIs says whether a policy has protocol proto and its first route is
// name.
func firstIs(proto, name string) func(string, []servedRoute) bool {
	return func(p string, rs []servedRoute) bool { return p == proto && len(rs) > 0 && rs[0].name == name }
}

// runLinkerdOutboundRouteCase runs case name of outbound_api.rs for the
// route kinds and parents Linkerd runs it for, beyond the TLSRoute and
// TCPRoute runs of linkerd_streamroutes.go.
func runLinkerdOutboundRouteCase(t *testing.T, newHarness Factory, name string) {
	t.Helper()
	services := []string{"Service"}
	both := []string{"Service", "EgressNetwork"}
	each := func(parents []string, kinds []routeKind, run func(t *testing.T, sp streamParent, rk routeKind)) {
		for _, sp := range streamParents() {
			if !contains(parents, sp.kind) {
				continue
			}
			for _, rk := range kinds {
				t.Run(sp.kind+"_"+rk.kind, func(t *testing.T) { run(t, sp, rk) })
			}
		}
	}
	start := func(t *testing.T, sp streamParent, objs ...runtime.Object) (Harness, []runtime.Object) {
		t.Helper()
		base := with(with(Base(), sp.objs...), objs...)
		return newHarness(t, base...), base
	}
	parentRef := func(sp streamParent) gatewayv1.ParentReference {
		return parentRefIn(sp.kind, NS, "parent", streamPort)
	}

	switch name {
	case "route_with_no_rules":
		each(both, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			h, base := start(t, sp)
			x := running(t, h.Source())
			stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
			recvServed(t, stream, isDefault(sp), "without the route: the default route")
			h.Set(t, append(base, withEmptyRules(t, rk.make(NS, "route", parentRef(sp))))...)
			routes := recvServed(t, stream, firstIs(rk.proto, "route"), "the route is served")
			assert.True(t, proto.Equal(routeMDOf(rk, NS, "route"), routes[0].meta), "route metadata: %v", routes[0].meta)
			assert.Empty(t, routes[0].rules, "a route with no rules is served without rules")
		})
	case "routes_without_backends":
		each(both, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			h, base := start(t, sp)
			x := running(t, h.Source())
			stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
			recvServed(t, stream, isDefault(sp), "without the route: the default route")
			h.Set(t, append(base, rk.make(NS, "route", parentRef(sp), nil))...)
			routes := recvServed(t, stream, firstIs(rk.proto, "route"), "the route is served")
			require.Len(t, routes[0].rules, 1, "one rule")
			require.Len(t, routes[0].rules[0], 1, "one backend: the parent's")
			assert.True(t, proto.Equal(parentMD(sp, streamPort), routes[0].rules[0][0].backend.GetMetadata()),
				"the parent's own backend: %v", routes[0].rules[0][0].backend.GetMetadata())
		})
	case "update_backend_on_route_with_no_port":
		// outbound/tests.rs: a route attached to its Service without a
		// port names a backend Service that does not exist yet; once it
		// does, the open watch of a port of the parent carries it.
		each(services, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			route := rk.make(NS, "route", parentRefIn(sp.kind, NS, "parent", 0), []gatewayv1.BackendRef{ServiceBackend(NS, "backend-svc", streamBackendPort)})
			h, base := start(t, sp, route)
			x := running(t, h.Source())
			stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
			oneBackend := func(valid bool) func(string, []servedRoute) bool {
				return func(p string, rs []servedRoute) bool {
					return firstIs(rk.proto, "route")(p, rs) && len(rs[0].rules) == 1 && len(rs[0].rules[0]) == 1 && (rs[0].rules[0][0].filters == 0) == valid
				}
			}
			recvServed(t, stream, oneBackend(false), "the route, its backend Service missing: invalid")
			h.Set(t, append(base, StreamService(NS, "backend-svc", streamBackendPort))...)
			routes := recvServed(t, stream, oneBackend(true), "the backend Service created: the same watch carries it")
			assert.Equal(t, "backend-svc."+NS+".svc.cluster.local:8888", routes[0].rules[0][0].backend.GetBalancer().GetDiscovery().GetDst().GetPath())
		})
	case "service_with_routes_with_cross_namespace_backend":
		each(services, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			h, base := start(t, sp)
			x := running(t, h.Source())
			stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
			recvServed(t, stream, isDefault(sp), "without the route: the default route")
			h.Set(t, append(base, StreamService("backend-ns", "backend", streamBackendPort),
				rk.make(NS, "route", parentRef(sp), []gatewayv1.BackendRef{ServiceBackend("backend-ns", "backend", streamBackendPort)}))...)
			// A source may see the route before the Service in the other
			// namespace (the Kubernetes source watches each kind on its
			// own): the policy it then serves names the backend invalid,
			// and the next one, once the Service is seen, valid.
			routes := recvServed(t, stream, func(p string, rs []servedRoute) bool {
				return firstIs(rk.proto, "route")(p, rs) && len(rs[0].rules) == 1 && len(rs[0].rules[0]) == 1 && rs[0].rules[0][0].filters == 0
			}, "the route is served with the Service in the other namespace")
			require.Len(t, routes[0].rules, 1)
			require.Len(t, routes[0].rules[0], 1)
			b := routes[0].rules[0][0]
			assert.Zero(t, b.filters, "the Service in the other namespace exists")
			assert.Equal(t, "backend.backend-ns.svc.cluster.local:8888", b.backend.GetBalancer().GetDiscovery().GetDst().GetPath())
			assert.Equal(t, "backend-ns", b.backend.GetMetadata().GetResource().GetNamespace())
		})
	case "producer_route", "pre_existing_producer_route":
		before := name == "pre_existing_producer_route"
		each(services, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			route := rk.make(NS, "route", parentRef(sp), []gatewayv1.BackendRef{sp.backend(backendName(sp))})
			var objs []runtime.Object
			if before {
				objs = append(objs, route)
			}
			h, base := start(t, sp, objs...)
			x := running(t, h.Source())
			client := serveOutbound(t, x)
			producer := watchTarget(t, client, NS, sp.target(streamPort))
			consumer := watchTarget(t, client, ConsumerNS, sp.target(streamPort))
			if !before {
				recvServed(t, producer, isDefault(sp), "producer namespace, without the route")
				recvServed(t, consumer, isDefault(sp), "consumer namespace, without the route")
				h.Set(t, append(base, route)...)
			}
			// A producer route (in its Service's namespace) applies to
			// clients of every namespace.
			for _, s := range []grpc.ServerStreamingClient[outbound.OutboundPolicy]{producer, consumer} {
				routes := recvServed(t, s, firstIs(rk.proto, "route"), "the producer route")
				assert.Equal(t, []string{"route"}, servedNames(routes))
			}
		})
	case "route_reattachment":
		each(both, requestRouteKinds(), func(t *testing.T, sp streamParent, rk routeKind) {
			backends := []gatewayv1.BackendRef{sp.backend(backendName(sp))}
			attached := rk.make(NS, "route", parentRef(sp), backends)
			detached := rk.make(NS, "route", parentRefIn(sp.kind, NS, "other", streamPort), backends)
			h, base := start(t, sp, attached)
			x := running(t, h.Source())
			stream := watchTarget(t, serveOutbound(t, x), NS, sp.target(streamPort))
			recvServed(t, stream, firstIs(rk.proto, "route"), "the route is attached")
			h.Set(t, append(base, detached)...)
			recvServed(t, stream, isDefault(sp), "detached: the default route again")
			h.Set(t, append(base, attached)...)
			recvServed(t, stream, firstIs(rk.proto, "route"), "attached again")
		})
	case "consumer_route":
		each(services, append(requestRouteKinds(), connectionRouteKinds()...), func(t *testing.T, sp streamParent, rk routeKind) {
			consumerRoute(t, newHarness, sp, rk)
		})
	default:
		t.Fatalf("no case %q", name)
	}
}

// routeMDOf is the metadata of route name of kind rk in ns.
func routeMDOf(rk routeKind, ns, name string) *meta.Metadata {
	group, kind := "gateway.networking.k8s.io", rk.kind
	if rk.kind == "PolicyHTTPRoute" {
		group, kind = "policy.linkerd.io", "HTTPRoute"
	}
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: group, Kind: kind, Namespace: ns, Name: name}}}
}

// consumerRoute is Linkerd's consumer_route for one route kind: a route
// in ConsumerNS whose parent is the Service in NS reaches clients in
// ConsumerNS only.
func consumerRoute(t *testing.T, newHarness Factory, sp streamParent, rk routeKind) {
	base := with(Base(), sp.objs...)
	h := newHarness(t, base...)
	x := running(t, h.Source())
	client := serveOutbound(t, x)
	producer := watchTarget(t, client, NS, sp.target(streamPort))
	consumer := watchTarget(t, client, ConsumerNS, sp.target(streamPort))
	other := watchTarget(t, client, OtherNS, sp.target(streamPort))
	for _, s := range []grpc.ServerStreamingClient[outbound.OutboundPolicy]{producer, consumer, other} {
		p, routes := recvNext(t, s, "the first policy")
		assert.True(t, isDefault(sp)(p, routes), "the default route first: %s %v", p, servedNames(routes))
	}

	parent := parentRefIn("Service", NS, "parent", streamPort)
	backends := []gatewayv1.BackendRef{ServiceBackend(NS, "backend", streamBackendPort)}
	route := rk.make(ConsumerNS, "route", parent, backends)
	h.Set(t, append(base, route)...)
	p, routes := recvNext(t, consumer, "the consumer route")
	require.Equal(t, rk.proto, p, "the consumer's namespace gets the route")
	assert.Equal(t, []string{"route"}, servedNames(routes))
	assert.True(t, proto.Equal(routeMDOf(rk, ConsumerNS, "route"), routes[0].meta), "route metadata: %v", routes[0].meta)
	require.Len(t, routes[0].rules, 1)
	require.Len(t, routes[0].rules[0], 1)
	assert.Equal(t, "backend."+NS+".svc.cluster.local:8888", routes[0].rules[0][0].backend.GetBalancer().GetDiscovery().GetDst().GetPath())

	// A producer route, named to come after the consumer's (same
	// creation time, then by name): every client gets it in its next
	// policy, so the producer's namespace and the third one had nothing
	// before it.
	probe := rk.make(NS, "zz-producer", parent, backends)
	h.Set(t, append(base, route, probe)...)
	for ns, s := range map[string]grpc.ServerStreamingClient[outbound.OutboundPolicy]{NS: producer, OtherNS: other} {
		p, routes := recvNext(t, s, "the producer route")
		assert.Equal(t, rk.proto, p, "%s: the producer route's protocol", ns)
		assert.Equal(t, []string{"zz-producer"}, servedNames(routes), "%s: the producer route only, never the consumer route", ns)
	}
	// The consumer gets both, ordered as Linkerd orders them. A port
	// serves one TCPRoute, the first, so there the consumer's policy
	// does not change: read it from the index, which the producer's
	// stream shows holds the producer route.
	want := []string{"route", "zz-producer"}
	if rk.kind == "TCPRoute" {
		want = want[:1]
	} else {
		routes = recvServed(t, consumer, func(p string, rs []servedRoute) bool {
			return p == rk.proto && len(rs) == len(want)
		}, "the consumer's routes with the producer route")
		assert.Equal(t, want, servedNames(routes), "consumer and producer routes merged")
	}
	target := sp.target(streamPort)
	target.SourceNamespace = ConsumerNS
	pol, err := x.Index().OutboundPolicy(target)
	require.NoError(t, err)
	_, routes = servedRoutes(pol)
	assert.Equal(t, want, servedNames(routes), "the index's policy for the consumer's namespace")

	// Without the consumer route, the consumer namespace is like any other.
	h.Set(t, append(base, probe)...)
	routes = recvServed(t, consumer, func(p string, rs []servedRoute) bool {
		return p == rk.proto && assert.ObjectsAreEqual([]string{"zz-producer"}, servedNames(rs))
	}, "the consumer route deleted")
	assert.Equal(t, []string{"zz-producer"}, servedNames(routes))
}
