//go:build kubeintegration

package integration_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// EgressNetworks created in a real API server (installed from Weft's CRD,
// strict field validation) reach the index through a real watch and are
// served on the Outbound API for an address outside the cluster: the
// Deny policy's refusing default route, a route attached to the
// EgressNetwork ahead of it, and the fallback once it is deleted. The API
// server refuses a traffic policy outside the enum; an empty networks
// list passes the schema (as in Linkerd's) and reaches the index as an
// empty list, which it reports and ignores, while an absent one means
// every address outside the cluster networks.
func TestEgressNetworksCreatedInTheAPIServerAreServedForExternalAddresses(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "egress", nil, nil)

	create := func(doc string) error {
		t.Helper()
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		_, err := c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
		return err
	}
	require.NoError(t, create(`apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: all-external}
spec: {trafficPolicy: Deny}
`))
	err := create(`apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: lower-case}
spec: {trafficPolicy: deny}
`)
	require.Error(t, err, "the schema's enum refuses a traffic policy Linkerd does not know")
	assert.Contains(t, err.Error(), "spec.trafficPolicy")
	require.NoError(t, create(`apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata: {name: empty}
spec: {trafficPolicy: Allow, networks: []}
`), "an empty list passes the schema; the webhook (off here) refuses it")

	src, err := policykube.New(ctx, c.kube, c.dyn, policykube.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	runCtx, stop := context.WithCancel(context.Background())
	// Other tests share the API server (the examples put a catch-all
	// EgressNetwork in linkerd-egress): the global egress namespace here
	// is one of this test's, with none.
	x, err := policy.NewIndexer(runCtx, src, policy.WithGlobalEgressNamespace(ns+"-global"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	external := netip.MustParseAddr("1.1.1.1")
	waitFor(t, time.Now(), x.Updated(), func() bool {
		ref, ok := x.Index().EgressNetworkFor(external, ns)
		return ok && ref.Name == "all-external"
	}, "the EgressNetwork without networks covers an external address")
	_, ok := x.Index().EgressNetworkFor(netip.MustParseAddr("10.1.2.3"), ns)
	assert.False(t, ok, "it leaves out the cluster networks")
	waitFor(t, time.Now(), x.Updated(), func() bool {
		for _, p := range x.Index().Errors() {
			if p.Object.Name == "empty" && p.Field == "spec.networks" {
				return true
			}
		}
		return false
	}, "the empty networks list arrives as an empty list and is refused")

	out, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	out.Register(gs)
	lis := testutil.Listen(t)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := outbound.NewOutboundPoliciesClient(conn).Watch(ctx, &outbound.TrafficSpec{
		SourceWorkload: ns + ":client-0",
		Target:         &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: 0x01010101}}, Port: 80}},
	})
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	md := first.GetMetadata().GetResource()
	assert.Equal(t, []string{"policy.linkerd.io", "EgressNetwork", ns, "all-external"}, []string{md.GetGroup(), md.GetKind(), md.GetNamespace(), md.GetName()})
	assert.Equal(t, uint32(80), md.GetPort())
	routes := first.GetProtocol().GetDetect().GetHttp1().GetRoutes()
	require.Len(t, routes, 1)
	assert.Equal(t, "http-egress-deny", routes[0].GetMetadata().GetDefault())
	assert.Equal(t, uint32(403), routes[0].GetRules()[0].GetFilters()[0].GetFailureInjector().GetStatus())
	assert.NotNil(t, first.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetFilters()[0].GetForbidden())

	// A route attached to the EgressNetwork comes first; the default
	// route still refuses the rest.
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, `apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: allow-get}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: all-external, port: 80}]
  rules: [{matches: [{path: {type: Exact, value: /get}}]}]
`)
	next, err := stream.Recv()
	require.NoError(t, err)
	routes = next.GetProtocol().GetDetect().GetHttp1().GetRoutes()
	require.Len(t, routes, 2)
	assert.Equal(t, "allow-get", routes[0].GetMetadata().GetResource().GetName())
	assert.Empty(t, routes[0].GetRules()[0].GetFilters())
	assert.NotNil(t, routes[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetForward(),
		"the route's default backend forwards to the original destination")
	assert.Equal(t, "http-egress-deny", routes[1].GetMetadata().GetDefault())

	require.NoError(t, c.dyn.Resource(policykube.EgressNetworksResource).Namespace(ns).Delete(ctx, "all-external", metav1.DeleteOptions{}))
	last, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "egress-fallback", last.GetMetadata().GetDefault(), "without an EgressNetwork the same stream carries the fallback")
	assert.Empty(t, src.Errors(), "objects the policy source could not convert")
}
