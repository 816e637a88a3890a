package sourcetest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

// Linkerd's test cases of EgressNetwork (linkerd2 tag version-2.20),
// under their names, grouped by the file they come from:
//
//   - egress_network: the unit tests of which EgressNetwork an address
//     resolves to (policy-controller k8s/index/src/outbound/index/
//     egress_network.rs), through a source and the index.
//   - outbound: the index tests of outbound/tests.rs. Linkerd closes a
//     watch whose parent changes (the proxy asks again); Weft's Outbound
//     API computes the policy again and sends it on the open stream, so
//     "the watch is closed" becomes "the stream carries the new parent".
//   - http, grpc: backend_egress_network of outbound/tests/routes.
//   - outbound_api_egress_network: policy-test's two cases over a real
//     Watch stream (Linkerd waits for the EgressNetwork's Accepted status
//     first; Weft writes none).
//   - outbound_api_failure_accrual: egress_network_ignores_balancer_toggles.
//   - admit_egress_networks: the admission cases (the webhook answers with
//     policy.Validate, and a source ignores what it refuses).
//
// Linkerd's tests use a global egress namespace of their own and
// 192.168.0.0/16 addresses outside their test cluster networks; here the
// global namespace is Weft's default and, where an EgressNetwork without
// networks is involved, the address is one outside Weft's default cluster
// networks (1.1.1.1, as policy-test uses).

// EgressNetwork returns an EgressNetwork; no networks means the field is
// absent (every address outside the cluster networks).
func EgressNetwork(ns, name string, tp v1alpha1.TrafficPolicy, networks ...v1alpha1.Network) *v1alpha1.EgressNetwork {
	return &v1alpha1.EgressNetwork{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "EgressNetwork"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.EgressNetworkSpec{TrafficPolicy: tp, Networks: networks},
	}
}

// Net is a network with exceptions.
func Net(cidr string, except ...string) v1alpha1.Network {
	return v1alpha1.Network{Cidr: cidr, Except: except}
}

// egressOf renders the EgressNetwork a client in srcNS gets for addr,
// "namespace/name", or "" for none.
func egressOf(x *policy.Indexer, addr, srcNS string) string {
	ref, ok := x.Index().EgressNetworkFor(netip.MustParseAddr(addr), srcNS)
	if !ok {
		return ""
	}
	return ref.Namespace + "/" + ref.Name
}

func eventuallyEgress(t *testing.T, x *policy.Indexer, addr, srcNS, want, msg string) {
	t.Helper()
	eventuallyTrue(t, func() bool { return egressOf(x, addr, srcNS) == want }, msg)
}

func serveOutbound(t *testing.T, x *policy.Indexer) outbound.OutboundPoliciesClient {
	t.Helper()
	os, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	os.Register(gs)
	l := testutil.Listen(t)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return outbound.NewOutboundPoliciesClient(conn)
}

// addrSpec asks, for a pod of namespace ns, about addr.
func addrSpec(ns string, addr netip.AddrPort) *outbound.TrafficSpec {
	a := addr.Addr().As4()
	return &outbound.TrafficSpec{SourceWorkload: ns + ":client-0", Target: &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{
		Ip:   &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])}},
		Port: uint32(addr.Port()),
	}}}
}

// watchAddr opens a Watch for addr on behalf of a pod in ns.
func watchAddr(t *testing.T, client outbound.OutboundPoliciesClient, ns, addr string) grpc.ServerStreamingClient[outbound.OutboundPolicy] {
	t.Helper()
	ctx := testutil.Context(t, 20*time.Second)
	stream, err := client.Watch(ctx, addrSpec(ns, netip.MustParseAddrPort(addr)))
	require.NoError(t, err)
	return stream
}

func egressMD(ns, name string, port uint32) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
		Group: "policy.linkerd.io", Kind: "EgressNetwork", Namespace: ns, Name: name, Port: port}}}
}

var fallbackMD = &meta.Metadata{Kind: &meta.Metadata_Default{Default: "egress-fallback"}}

// recvMeta reads the next policy of a stream and checks its metadata.
func recvMeta(t *testing.T, stream grpc.ServerStreamingClient[outbound.OutboundPolicy], want *meta.Metadata, msg string) *outbound.OutboundPolicy {
	t.Helper()
	p, err := stream.Recv()
	require.NoError(t, err, msg)
	assert.True(t, proto.Equal(want, p.GetMetadata()), "%s: got %v, want %v", msg, p.GetMetadata(), want)
	return p
}

func at(o *v1alpha1.EgressNetwork, year int) *v1alpha1.EgressNetwork {
	o.CreationTimestamp = metav1.NewTime(time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC))
	return o
}

func runLinkerdEgress(t *testing.T, newHarness Factory) {
	global := policy.DefaultGlobalEgressNamespace
	resolves := func(t *testing.T, srcNS, addr, want string, nets ...runtime.Object) {
		t.Helper()
		h := newHarness(t, with(Base(), nets...)...)
		x := running(t, h.Source())
		probe := nets[len(nets)-1].(*v1alpha1.EgressNetwork)
		// Wait until the index holds the networks (the last one given
		// resolves its own first network's address from its namespace).
		eventuallyTrue(t, func() bool { return egressSeen(x, probe) }, "the EgressNetworks are indexed")
		assert.Equal(t, want, egressOf(x, addr, srcNS))
	}

	t.Run("egress_network", func(t *testing.T) {
		t.Run("test_picks_smallest_cidr", func(t *testing.T) {
			resolves(t, "ns", "192.168.0.4", global+"/net-2",
				EgressNetwork(global, "net-1", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")),
				EgressNetwork(global, "net-2", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/24")))
		})
		t.Run("test_picks_local_ns", func(t *testing.T) {
			resolves(t, "ns-1", "192.168.0.4", "ns-1/net-1",
				EgressNetwork("ns-1", "net-1", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")),
				EgressNetwork(global, "net-2", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/24")))
		})
		t.Run("does_not_pick_network_in_unralated_ns", func(t *testing.T) {
			resolves(t, "ns-1", "192.168.0.4", "",
				EgressNetwork("other-ns", "net-1", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")))
		})
		t.Run("test_picks_older_resource", func(t *testing.T) {
			resolves(t, "ns", "192.168.0.4", global+"/net-2",
				at(EgressNetwork(global, "net-1", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")), 2025),
				at(EgressNetwork(global, "net-2", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")), 2024))
		})
		t.Run("test_picks_alphabetical_order", func(t *testing.T) {
			resolves(t, "ns", "192.168.0.4", global+"/a",
				EgressNetwork(global, "b", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")),
				EgressNetwork(global, "a", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")))
		})
		t.Run("test_respects_exception", func(t *testing.T) {
			resolves(t, "ns", "192.168.0.4", global+"/d",
				EgressNetwork(global, "b", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16", "192.168.0.4")),
				EgressNetwork(global, "d", v1alpha1.TrafficPolicyAllow, Net("192.168.0.1/16")))
		})
		// Linkerd's rule, kept: once the client's namespace has any
		// EgressNetwork, the global ones are not considered, even for an
		// address none of the namespace's contains.
		t.Run("WeftOnlyTheClientsNamespaceCountsOnceItHasAny", func(t *testing.T) {
			resolves(t, NS, "203.0.113.9", "",
				EgressNetwork(global, "everything", v1alpha1.TrafficPolicyDeny),
				EgressNetwork(NS, "partner", v1alpha1.TrafficPolicyAllow, Net("198.51.100.0/24")))
		})
	})

	t.Run("outbound", func(t *testing.T) {
		t.Run("switch_to_another_egress_network_parent", func(t *testing.T) {
			h := newHarness(t, with(Base(), EgressNetwork(NS, "b", v1alpha1.TrafficPolicyAllow))...)
			x := running(t, h.Source())
			eventuallyEgress(t, x, "1.1.1.1", NS, NS+"/b", "network b resolves")
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:8080")
			recvMeta(t, stream, egressMD(NS, "b", 8080), "first resolution is for network b")

			h.Set(t, with(Base(), EgressNetwork(NS, "b", v1alpha1.TrafficPolicyAllow), EgressNetwork(NS, "a", v1alpha1.TrafficPolicyAllow))...)
			recvMeta(t, stream, egressMD(NS, "a", 8080), "the same stream switches to network a")
		})
		t.Run("fallback_rx_closed_when_egress_net_created", func(t *testing.T) {
			h := newHarness(t, Base()...)
			x := running(t, h.Source())
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:8080")
			recvMeta(t, stream, fallbackMD, "no EgressNetwork: the fallback")
			h.Set(t, with(Base(), EgressNetwork(NS, "egress-net", v1alpha1.TrafficPolicyAllow))...)
			recvMeta(t, stream, egressMD(NS, "egress-net", 8080), "the stream leaves the fallback for the new network")
		})
		t.Run("fallback_rx_closed_when_egress_net_deleted", func(t *testing.T) {
			en := EgressNetwork(NS, "egress-net", v1alpha1.TrafficPolicyAllow)
			h := newHarness(t, with(Base(), en)...)
			x := running(t, h.Source())
			eventuallyEgress(t, x, "1.1.1.1", NS, NS+"/egress-net", "the network resolves")
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:8080")
			recvMeta(t, stream, egressMD(NS, "egress-net", 8080), "the network applies")
			h.Set(t, Base()...)
			recvMeta(t, stream, fallbackMD, "the stream falls back once the network is deleted")
		})
		t.Run("update_backend_on_route_with_no_port", func(t *testing.T) {
			runLinkerdOutboundRouteCase(t, newHarness, "update_backend_on_route_with_no_port")
		})
	})

	backendOf := func(t *testing.T, parent *outbound.OutboundPolicy, grpcRoute bool) *outbound.Backend {
		t.Helper()
		if grpcRoute {
			routes := parent.GetProtocol().GetGrpc().GetRoutes()
			require.Len(t, routes, 2, "the route, then the EgressNetwork's default route")
			assert.Equal(t, "route", routes[0].GetMetadata().GetResource().GetName())
			wbs := routes[0].GetRules()[0].GetBackends().GetRandomAvailable().GetBackends()
			require.Len(t, wbs, 1)
			assert.Empty(t, wbs[0].GetBackend().GetFilters(), "a valid backend has no failure injector")
			return wbs[0].GetBackend().GetBackend()
		}
		routes := parent.GetProtocol().GetDetect().GetHttp1().GetRoutes()
		require.Len(t, routes, 2, "the route, then the EgressNetwork's default route")
		assert.Equal(t, "route", routes[0].GetMetadata().GetResource().GetName())
		wbs := routes[0].GetRules()[0].GetBackends().GetRandomAvailable().GetBackends()
		require.Len(t, wbs, 1)
		assert.Empty(t, wbs[0].GetBackend().GetFilters(), "a valid backend has no failure injector")
		return wbs[0].GetBackend().GetBackend()
	}
	for _, grpcRoute := range []bool{false, true} {
		group := "http"
		if grpcRoute {
			group = "grpc"
		}
		t.Run(group, func(t *testing.T) {
			t.Run("backend_egress_network", func(t *testing.T) {
				apex := EgressNetwork(NS, "apex", v1alpha1.TrafficPolicyAllow)
				h := newHarness(t, with(Base(), apex, egressRoute("route", "apex", 8080, grpcRoute, egressBackend("apex")))...)
				x := running(t, h.Source())
				eventuallyEgress(t, x, "1.1.1.1", NS, NS+"/apex", "apex resolves")
				var p *outbound.OutboundPolicy
				eventuallyTrue(t, func() bool {
					var err error
					p, err = x.Index().OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:8080"), SourceNamespace: NS})
					return err == nil && len(p.GetProtocol().GetDetect().GetHttp1().GetRoutes())+len(p.GetProtocol().GetGrpc().GetRoutes()) == 2
				}, "the route is attached")
				b := backendOf(t, p, grpcRoute)
				assert.True(t, proto.Equal(egressMD(NS, "apex", 8080), b.GetMetadata()), "the backend is the EgressNetwork: %v", b.GetMetadata())
				fwd := b.GetForward()
				require.NotNil(t, fwd, "an EgressNetwork backend forwards to the original destination")
				assert.Equal(t, uint32(8080), fwd.GetAddr().GetPort())
				assert.Equal(t, uint32(0x01010101), fwd.GetAddr().GetIp().GetIpv4())
			})
		})
	}

	t.Run("outbound_api_egress_network", func(t *testing.T) {
		t.Run("egress_switches_to_fallback", func(t *testing.T) {
			en := EgressNetwork(NS, "egress-net", v1alpha1.TrafficPolicyAllow)
			h := newHarness(t, with(Base(), en)...)
			x := running(t, h.Source())
			eventuallyEgress(t, x, "1.1.1.1", NS, NS+"/egress-net", "the network is indexed")
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:80")
			recvMeta(t, stream, egressMD(NS, "egress-net", 80), "the EgressNetwork's policy")
			h.Set(t, Base()...)
			recvMeta(t, stream, fallbackMD, "after its deletion, the fallback")
		})
		t.Run("fallback_switches_to_egress", func(t *testing.T) {
			h := newHarness(t, Base()...)
			x := running(t, h.Source())
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:80")
			recvMeta(t, stream, fallbackMD, "no EgressNetwork yet")
			h.Set(t, with(Base(), EgressNetwork(NS, "egress-net", v1alpha1.TrafficPolicyAllow))...)
			recvMeta(t, stream, egressMD(NS, "egress-net", 80), "the new EgressNetwork's policy")
		})
	})

	t.Run("outbound_api_failure_accrual", func(t *testing.T) {
		t.Run("egress_network_ignores_balancer_toggles", func(t *testing.T) {
			en := EgressNetwork(NS, "egress-net", v1alpha1.TrafficPolicyAllow)
			en.Annotations = map[string]string{
				"balancer.alpha.linkerd.io/penalize-failures":                 "true",
				"balancer.alpha.linkerd.io/failure-accrual-honor-retry-after": "true",
			}
			h := newHarness(t, with(Base(), en)...)
			x := running(t, h.Source())
			eventuallyEgress(t, x, "1.1.1.1", NS, NS+"/egress-net", "the network is indexed")
			stream := watchAddr(t, serveOutbound(t, x), NS, "1.1.1.1:4191")
			p := recvMeta(t, stream, egressMD(NS, "egress-net", 4191), "the EgressNetwork's policy")
			for _, r := range p.GetProtocol().GetDetect().GetHttp1().GetRoutes() {
				for _, rule := range r.GetRules() {
					for _, rb := range rule.GetBackends().GetFirstAvailable().GetBackends() {
						assert.Nil(t, rb.GetBackend().GetBalancer(), "no balancer, so no penalty estimator and no Retry-After cap")
						assert.NotNil(t, rb.GetBackend().GetForward())
					}
				}
			}
			assert.Nil(t, p.GetProtocol().GetDetect().GetHttp1().GetFailureAccrual().GetUnified(), "no Retry-After cap without an accrual mode")
		})
	})

	t.Run("admit_egress_networks", func(t *testing.T) {
		admission := func(t *testing.T, en *v1alpha1.EgressNetwork, wantField string) {
			t.Helper()
			problems := policy.Validate(en, nil)
			if wantField == "" {
				assert.Empty(t, problems)
			} else if assert.NotEmpty(t, problems, "refused") {
				assert.Equal(t, wantField, problems[0].Field, "%v", problems)
			}
			h := newHarness(t, with(Base(), en)...)
			x := running(t, h.Source())
			if wantField == "" {
				eventuallyEgress(t, x, "10.1.0.7", en.Namespace, en.Namespace+"/"+en.Name, "an accepted EgressNetwork applies")
				return
			}
			eventuallyTrue(t, func() bool { return hasProblem(x, "error: ", en.Name, wantField) }, "the source reports the refused EgressNetwork")
			assert.Equal(t, "", egressOf(x, "10.1.0.7", en.Namespace), "a refused EgressNetwork applies to nothing")
		}
		t.Run("accepts_valid", func(t *testing.T) {
			admission(t, EgressNetwork(NS, "test", v1alpha1.TrafficPolicyAllow, Net("10.1.0.0/24"), Net("10.1.1.0/24", "10.1.1.0/28")), "")
		})
		t.Run("rejects_empty_networks", func(t *testing.T) {
			en := EgressNetwork(NS, "test", v1alpha1.TrafficPolicyAllow)
			en.Spec.Networks = []v1alpha1.Network{}
			admission(t, en, "spec.networks")
		})
		t.Run("WeftRejectsAnUnknownTrafficPolicy", func(t *testing.T) {
			// The CRD's enum refuses it in a cluster, and the strict
			// decoder in a file (the whole file, naming the field); the
			// translation refuses it too, for the webhook and for
			// anything that skipped the schema.
			problems := policy.Validate(EgressNetwork(NS, "test", "allow", Net("10.1.0.0/24")), nil)
			require.NotEmpty(t, problems)
			assert.Equal(t, "spec.trafficPolicy", problems[0].Field, "%v", problems)
		})
		t.Run("WeftRejectsAnExceptionOutsideItsNetwork", func(t *testing.T) {
			admission(t, EgressNetwork(NS, "test", v1alpha1.TrafficPolicyDeny, Net("10.1.0.0/24", "10.2.0.0/28")), "spec.networks[0]")
		})
	})
}

// egressSeen reports whether en is in the index: the address of its
// first network (or 1.1.1.1 without networks) resolves, from its own
// namespace, to an EgressNetwork of that namespace.
func egressSeen(x *policy.Indexer, en *v1alpha1.EgressNetwork) bool {
	addr := "1.1.1.1"
	if len(en.Spec.Networks) > 0 {
		addr = netip.MustParsePrefix(en.Spec.Networks[0].Cidr).Masked().Addr().String()
	}
	ref, ok := x.Index().EgressNetworkFor(netip.MustParseAddr(addr), en.Namespace)
	return ok && ref.Namespace == en.Namespace
}

// egressBackend is a backendRef to the EgressNetwork name in NS.
func egressBackend(name string) gatewayv1.BackendRef {
	g, k := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork")
	return gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(name)}}
}

// egressRoute is a Gateway API HTTPRoute (or GRPCRoute) in NS whose
// parent is the EgressNetwork parent on port, with one rule sending to
// backends (none: the parent's default backend).
func egressRoute(name, parent string, port int32, grpcRoute bool, backends ...gatewayv1.BackendRef) runtime.Object {
	g, k := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork")
	p := gatewayv1.PortNumber(port)
	pr := gatewayv1.ParentReference{Group: &g, Kind: &k, Name: gatewayv1.ObjectName(parent), Port: &p}
	if grpcRoute {
		rule := gatewayv1.GRPCRouteRule{}
		for _, b := range backends {
			rule.BackendRefs = append(rule.BackendRefs, gatewayv1.GRPCBackendRef{BackendRef: b})
		}
		return &gatewayv1.GRPCRoute{
			TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "GRPCRoute"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
			Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{pr}},
				Rules: []gatewayv1.GRPCRouteRule{rule}},
		}
	}
	rule := gatewayv1.HTTPRouteRule{}
	for _, b := range backends {
		rule.BackendRefs = append(rule.BackendRefs, gatewayv1.HTTPBackendRef{BackendRef: b})
	}
	return &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{pr}},
			Rules: []gatewayv1.HTTPRouteRule{rule}},
	}
}
