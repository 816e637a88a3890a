package policy_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/opaqueroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

const egressDoc = `apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  clusterIP: 10.96.0.20
  ports: [{name: http, port: 8080}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: partner, namespace: shop}
spec:
  trafficPolicy: Deny
  networks: [{cidr: 203.0.113.0/24}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata:
  name: all-external
  namespace: linkerd-egress
  annotations: {config.linkerd.io/opaque-ports: "5432"}
spec: {trafficPolicy: Allow}
`

// forward is the Backend an EgressNetwork's default backend is: a forward
// to the address the proxy asked about.
func forward(md *meta.Metadata, ip uint32, port uint32) *outbound.Backend {
	return &outbound.Backend{Metadata: md,
		Queue: &outbound.Queue{Capacity: 100, FailfastTimeout: durpb(3 * time.Second)},
		Kind: &outbound.Backend_Forward{Forward: &destination.WeightedAddr{
			Addr: &pnet.TcpAddress{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: ip}}, Port: port}, Weight: 1}}}
}

func enMeta(ns, name string, port uint32) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "policy.linkerd.io", Kind: "EgressNetwork", Namespace: ns, Name: name, Port: port}}}
}

func durpb(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func defMeta(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}}
}

func TestADenyEgressNetworkIsServedWithLinkerdsRefusingDefaultRoutes(t *testing.T) {
	ix := policy.Build(objectsFrom(t, egressDoc), nil)
	assert.Empty(t, ix.Errors())
	dst := netip.MustParseAddrPort("203.0.113.7:80")
	pol, err := ix.OutboundPolicy(policy.OutboundTarget{Addr: dst, SourceNamespace: "shop"})
	require.NoError(t, err)

	md := enMeta("shop", "partner", 80)
	backend := forward(md, 0xcb007107, 80)
	httpRoute := &outbound.HttpRoute{Metadata: defMeta("http-egress-deny"), Rules: []*outbound.HttpRoute_Rule{{
		Matches:  []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}},
		Timeouts: &httproute.Timeouts{},
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: backend}}}}},
		Filters: []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{
			FailureInjector: &httproute.HttpFailureInjector{Status: 403, Message: "traffic not allowed"}}}},
	}}}
	opaqueRoute := &outbound.OpaqueRoute{Metadata: defMeta("tcp-egress-deny"), Rules: []*outbound.OpaqueRoute_Rule{{
		Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.OpaqueRoute_Distribution_FirstAvailable{Backends: []*outbound.OpaqueRoute_RouteBackend{{Backend: backend}}}}},
		Filters: []*outbound.OpaqueRoute_Filter{{Kind: &outbound.OpaqueRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}},
	}}}
	want := &outbound.OutboundPolicy{Metadata: md, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: durpb(10 * time.Second),
		Opaque:  &outbound.ProxyProtocol_Opaque{Routes: []*outbound.OpaqueRoute{opaqueRoute}},
		Http1:   &outbound.ProxyProtocol_Http1{Routes: []*outbound.HttpRoute{httpRoute}},
		Http2:   &outbound.ProxyProtocol_Http2{Routes: []*outbound.HttpRoute{httpRoute}},
	}}}}
	assert.True(t, proto.Equal(want, pol), "got %v", pol)
}

func TestAnAllowEgressNetworkForwardsAndItsOpaquePortsAreOpaque(t *testing.T) {
	ix := policy.Build(objectsFrom(t, egressDoc), nil)
	// From another namespace, the global EgressNetwork applies (shop's
	// does not count for clients of web).
	pol, err := ix.OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("203.0.113.7:5432"), SourceNamespace: "web"})
	require.NoError(t, err)
	md := enMeta("linkerd-egress", "all-external", 5432)
	assert.True(t, proto.Equal(md, pol.GetMetadata()), "got %v", pol.GetMetadata())
	routes := pol.GetProtocol().GetOpaque().GetRoutes()
	require.Len(t, routes, 1, "the annotation makes 5432 opaque: %v", pol.GetProtocol())
	assert.True(t, proto.Equal(defMeta("tcp-egress-allow"), routes[0].GetMetadata()))
	assert.Empty(t, routes[0].GetRules()[0].GetFilters(), "Allow forbids nothing")
	assert.True(t, proto.Equal(forward(md, 0xcb007107, 5432), routes[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend()))

	pol, err = ix.OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("198.51.100.1:80"), SourceNamespace: "web"})
	require.NoError(t, err)
	h := pol.GetProtocol().GetDetect().GetHttp1().GetRoutes()
	require.Len(t, h, 1)
	assert.True(t, proto.Equal(defMeta("http-egress-allow"), h[0].GetMetadata()))
	assert.Empty(t, h[0].GetRules()[0].GetFilters())

	// Inside the cluster networks the global EgressNetwork (no networks)
	// does not apply: the fallback.
	pol, err = ix.OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("10.1.2.3:80"), SourceNamespace: "web"})
	require.NoError(t, err)
	assert.True(t, proto.Equal(defMeta("egress-fallback"), pol.GetMetadata()))

	// shop has an EgressNetwork, so the global one does not count there,
	// even for an address shop's does not contain (Linkerd's rule).
	pol, err = ix.OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("198.51.100.1:80"), SourceNamespace: "shop"})
	require.NoError(t, err)
	assert.True(t, proto.Equal(defMeta("egress-fallback"), pol.GetMetadata()))
}

func TestAGRPCRouteOnAnEgressNetworkComesBeforeItsRefusingDefaultRoute(t *testing.T) {
	doc := egressDoc + `---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: billing, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: partner}]
  rules:
  - matches: [{method: {service: billing.v1.Billing}}]
    backendRefs:
    - {group: policy.linkerd.io, kind: EgressNetwork, name: partner, port: 443}
    - {group: policy.linkerd.io, kind: EgressNetwork, name: elsewhere}
    - {name: api, port: 8080}
`
	ix := policy.Build(objectsFrom(t, doc), nil)
	assert.Empty(t, ix.Errors())
	pol, err := ix.OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("203.0.113.7:8443"), SourceNamespace: "shop"})
	require.NoError(t, err)
	routes := pol.GetProtocol().GetGrpc().GetRoutes()
	require.Len(t, routes, 2, "a GRPCRoute makes the protocol gRPC: %v", pol.GetProtocol())
	assert.Equal(t, "billing", routes[0].GetMetadata().GetResource().GetName())
	wbs := routes[0].GetRules()[0].GetBackends().GetRandomAvailable().GetBackends()
	require.Len(t, wbs, 3)
	// The same EgressNetwork forwards to the original destination; its
	// port only names the backend.
	assert.True(t, proto.Equal(forward(enMeta("shop", "partner", 443), 0xcb007107, 8443), wbs[0].GetBackend().GetBackend()), "got %v", wbs[0])
	assert.Contains(t, wbs[1].GetBackend().GetFilters()[0].GetFailureInjector().GetMessage(), "same EgressNetwork as a parent",
		"another EgressNetwork is an invalid backend")
	assert.Equal(t, "api.shop.svc.cluster.local:8080", wbs[2].GetBackend().GetBackend().GetBalancer().GetDiscovery().GetDst().GetPath(),
		"a Service backend routes back into the cluster")

	def := routes[1]
	assert.True(t, proto.Equal(defMeta("grpc-egress-deny"), def.GetMetadata()))
	require.Len(t, def.GetRules(), 1)
	assert.Empty(t, def.GetRules()[0].GetMatches(), "every call")
	assert.True(t, proto.Equal(&grpcroute.GrpcFailureInjector{Code: 7, Message: "traffic not allowed"}, def.GetRules()[0].GetFilters()[0].GetFailureInjector()))
	assert.Empty(t, def.GetHosts())
}

func TestRoutesNamingAMissingOrForeignEgressNetworkAreWarnings(t *testing.T) {
	doc := egressDoc + `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: lost, namespace: shop}
spec:
  parentRefs:
  - {group: policy.linkerd.io, kind: EgressNetwork, name: nowhere}
  - {group: policy.linkerd.io, kind: EgressNetwork, name: all-external, namespace: linkerd-egress}
  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]
`
	ix := policy.Build(objectsFrom(t, doc), nil)
	assert.Empty(t, ix.Errors())
	var warns []string
	for _, p := range ix.Problems() {
		warns = append(warns, p.String())
	}
	assert.Contains(t, joinLines(warns), "EgressNetwork shop/nowhere not found")
	assert.Contains(t, joinLines(warns), "routes for an EgressNetwork in another namespace are not supported")
}

func joinLines(s []string) string { return strings.Join(s, "\n") }

// The source workload of a lookup by address is the proxy's word: a
// namespace holding any byte is served (it has no EgressNetwork, so the
// global one applies), never confused with the address it asks about.
func TestALookupByAddressFromANamespaceWithAnyBytesIsServedTheGlobalEgressNetwork(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src := policy.NewMemorySource(objectsFrom(t, egressDoc))
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	srv.Register(gs)
	l := testutil.Listen(t)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := outbound.NewOutboundPoliciesClient(conn)

	spec := func(workload string) *outbound.TrafficSpec {
		return &outbound.TrafficSpec{SourceWorkload: workload, Target: &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{
			Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: 0xcb007107}}, Port: 80}}}
	}
	rctx := testutil.Context(t, 10*time.Second)
	stream, err := client.Watch(rctx, spec(`{"ns":"shop\u0000198.51.100.1:9","pod":"p"}`))
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	assert.True(t, proto.Equal(enMeta("linkerd-egress", "all-external", 80), first.GetMetadata()), "got %v", first.GetMetadata())
	fwd := first.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetForward()
	assert.Equal(t, uint32(80), fwd.GetAddr().GetPort(), "the address asked about, not one the namespace spells")
	assert.Equal(t, uint32(0xcb007107), fwd.GetAddr().GetIp().GetIpv4())

	got, err := client.Get(rctx, spec("shop:client-0"))
	require.NoError(t, err)
	assert.True(t, proto.Equal(enMeta("shop", "partner", 80), got.GetMetadata()), "from shop, shop's EgressNetwork")

	_, err = client.Get(rctx, spec("not-a-workload"))
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "a malformed source workload is refused, as before")
}

// The cases of Linkerd's outbound_api_failure_accrual.rs that run for an
// EgressNetwork parent too. For the EgressNetwork, the accrual the
// Outbound API serves must be the Service's for the same annotations, and
// there is no estimator at all (Linkerd's EgressNetwork checks: no penalty
// estimator, no Retry-After cap), as its default backend forwards.
func TestLinkerdFailureAccrualCasesForAnEgressNetworkParent(t *testing.T) {
	for _, tc := range []struct {
		name string
		ann  map[string]string
	}{
		{"consecutive_failure_accrual", map[string]string{annAccrual: "consecutive", annMaxFailures: "8", annMinPenalty: "10s", annMaxPenalty: "10m", annJitter: "1.0"}},
		{"consecutive_failure_accrual_defaults_no_config", map[string]string{annAccrual: "consecutive"}},
		{"consecutive_failure_accrual_defaults_max_fails", map[string]string{annAccrual: "consecutive", annMaxFailures: "8"}},
		{"consecutive_failure_accrual_defaults_jitter", map[string]string{annAccrual: "consecutive", annJitter: "1.0"}},
		{"default_failure_accrual", map[string]string{annMaxFailures: "8"}},
		{"unified_failure_accrual", map[string]string{annAccrual: "unified", annSRThreshold: "0.9", annSRWindow: "30s", annSRMin: "100"}},
		{"unified_failure_accrual_defaults_no_config", map[string]string{annAccrual: "unified"}},
		{"unified_honor_retry_after_sets_hint", map[string]string{annAccrual: "unified", annHonor: "true"}},
		{"success_rate_annotations_ignored_under_consecutive", map[string]string{annAccrual: "consecutive", annSRThreshold: "0.9"}},
		{"penalize_failures_emits_penalty_estimator", map[string]string{annPenalize: "true"}},
		{"honor_retry_after_keeps_plain_estimator", map[string]string{annAccrual: "consecutive", annHonor: "true"}},
		{"penalize_and_honor_retry_after_combined", map[string]string{annAccrual: "consecutive", annPenalize: "true", annHonor: "true"}},
		{"invalid_penalize_failures_value_produces_default", map[string]string{annPenalize: "invalid"}},
		{"unannotated_service_has_no_new_config", nil},
		{"consecutive_accrual_pipeline_unchanged", map[string]string{annAccrual: "consecutive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := outboundFor(t, tc.ann, 80)
			en := &v1alpha1.EgressNetwork{
				ObjectMeta: metav1.ObjectMeta{Name: "egress", Namespace: "my-app", Annotations: tc.ann},
				Spec:       v1alpha1.EgressNetworkSpec{TrafficPolicy: v1alpha1.TrafficPolicyAllow},
			}
			objs := &policy.Objects{}
			require.NoError(t, objs.Add(en, policy.Location{}))
			p, err := policy.Build(objs, nil).OutboundPolicy(policy.OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:80"), SourceNamespace: "my-app"})
			require.NoError(t, err)
			require.True(t, proto.Equal(enMeta("my-app", "egress", 80), p.GetMetadata()), "got %v", p.GetMetadata())
			assert.True(t, proto.Equal(accrualOf(svc), accrualOf(p)), "the Service's accrual %v, the EgressNetwork's %v", accrualOf(svc), accrualOf(p))
			assert.True(t, proto.Equal(accrualOf(p), p.GetProtocol().GetDetect().GetHttp2().GetFailureAccrual()))
			b := p.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend()
			assert.Nil(t, b.GetBalancer(), "no balancer, so no estimator")
			assert.NotNil(t, b.GetForward())
		})
	}
}
