package discovery_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/discovery"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const web = "web.shop.svc.cluster.local:80"

func webSvc() *corev1.Service {
	return dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080})
}

var httpPort = []dt.SlicePort{{Name: "http", Port: 8080}}

func resolve(t *testing.T, objs []runtime.Object, path string, opts ...discovery.Option) discovery.EndpointSet {
	t.Helper()
	set, err := discovery.ResolveEndpoints(objs, path, opts...)
	require.NoError(t, err)
	return set
}

func addrsOf(set discovery.EndpointSet) []string {
	out := []string{}
	for _, e := range set.Endpoints {
		out = append(out, e.Addr.String())
	}
	return out
}

func TestIdentityIsGivenOnlyToPodsOfThisControlPlane(t *testing.T) {
	objs := []runtime.Object{webSvc(),
		dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0)),
		dt.Pod("shop", "b", "10.0.0.2", "web", dt.Meshed("linkerd", 0)),
		dt.Pod("shop", "c", "10.0.0.3", ""),
		dt.EndpointSlice("shop", "web-a", "web", httpPort, dt.Endpoint("10.0.0.1", "a"), dt.Endpoint("10.0.0.2", "b"), dt.Endpoint("10.0.0.3", "c"))}
	set := resolve(t, objs, web, discovery.WithTrustDomain("example.org"))
	require.Len(t, set.Endpoints, 3)
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.example.org", set.Endpoints[0].Identity)
	assert.Empty(t, set.Endpoints[1].Identity, "another control plane's pod gets no identity from us")
	assert.Equal(t, discovery.HintH2, set.Endpoints[1].Hint, "but it runs a proxy that speaks HTTP/2")
	assert.Empty(t, set.Endpoints[2].Identity)
	assert.Equal(t, "default", set.Endpoints[2].MetricLabels["serviceaccount"])

	set = resolve(t, objs, web, discovery.WithControlPlaneNamespace("linkerd"))
	assert.Equal(t, "web.shop.serviceaccount.identity.linkerd.cluster.local", set.Endpoints[1].Identity)
	set = resolve(t, objs, web, discovery.WithH2Upgrade(false))
	assert.Equal(t, discovery.HintUnknown, set.Endpoints[0].Hint)
}

func TestSkippedInboundPortGetsNoIdentityOrHint(t *testing.T) {
	objs := []runtime.Object{webSvc(),
		dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0), dt.Annotations("config.linkerd.io/skip-inbound-ports", "8080")),
		dt.EndpointSlice("shop", "web-a", "web", httpPort, dt.Endpoint("10.0.0.1", "a"))}
	set := resolve(t, objs, web)
	require.Len(t, set.Endpoints, 1)
	assert.Empty(t, set.Endpoints[0].Identity, "the proxy does not intercept a skipped port, so there is no TLS on it")
	assert.Equal(t, discovery.HintUnknown, set.Endpoints[0].Hint)
}

func TestEndpointOfUnknownPodIsLeftOut(t *testing.T) {
	objs := []runtime.Object{webSvc(),
		dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0)),
		dt.EndpointSlice("shop", "web-a", "web", httpPort, dt.Endpoint("10.0.0.1", "a"), dt.Endpoint("10.0.0.2", "gone"), dt.Endpoint("10.0.0.3", ""))}
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.3:8080"}, addrsOf(resolve(t, objs, web)),
		"a pod reference that does not resolve is skipped; an endpoint without a pod is kept")
}

func TestServicePortResolvesToTheSlicePortOfTheSameName(t *testing.T) {
	svc := dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080}, dt.ServicePort{Name: "admin", Port: 9990, TargetPort: 9990})
	objs := []runtime.Object{svc, dt.Pod("shop", "a", "10.0.0.1", "web"),
		dt.EndpointSlice("shop", "web-a", "web", []dt.SlicePort{{Name: "admin", Port: 9991}, {Name: "http", Port: 8081}}, dt.Endpoint("10.0.0.1", "a"))}
	assert.Equal(t, []string{"10.0.0.1:8081"}, addrsOf(resolve(t, objs, web)))
	assert.Equal(t, []string{"10.0.0.1:9991"}, addrsOf(resolve(t, objs, "web.shop.svc.cluster.local:9990")))
	assert.Equal(t, []string{"10.0.0.1:7000"}, addrsOf(resolve(t, objs, "web.shop.svc.cluster.local:7000")),
		"a port the service does not declare is used as is, as Linkerd does")
}

func TestDualStackServiceUsesItsPrimaryFamily(t *testing.T) {
	svc := webSvc()
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	objs := []runtime.Object{svc, dt.Pod("shop", "a", "10.0.0.1", "web"),
		dt.EndpointSlice("shop", "web-v4", "web", httpPort, dt.Endpoint("10.0.0.1", "a")),
		dt.EndpointSlice("shop", "web-v6", "web", httpPort, dt.Endpoint("fd00::1", "a"))}
	assert.Equal(t, []string{"[fd00::1]:8080"}, addrsOf(resolve(t, objs, web)))
	svc.Spec.IPFamilies = nil
	assert.Equal(t, []string{"10.0.0.1:8080"}, addrsOf(resolve(t, objs, web)))
}

func TestExternalNameServiceDoesNotExistForDiscovery(t *testing.T) {
	svc := webSvc()
	svc.Spec.Type = corev1.ServiceTypeExternalName
	set := resolve(t, []runtime.Object{svc}, web)
	assert.False(t, set.Exists, "the proxy may fall back to DNS")
}

func TestPodIPLookupIgnoresFinishedPodsAndHostNetworkPodsOnOtherPorts(t *testing.T) {
	done := dt.Pod("shop", "old", "10.0.0.1", "web", dt.Phase(corev1.PodSucceeded))
	live := dt.Pod("shop", "new", "10.0.0.1", "web")
	host := dt.Pod("kube-system", "agent", "192.168.1.5", "agent", dt.ContainerPort("metrics", 9100))
	host.Spec.HostNetwork = true
	objs := []runtime.Object{done, live, host}
	set := resolve(t, objs, "10.0.0.1:8080")
	require.Len(t, set.Endpoints, 1)
	assert.Equal(t, "new", set.Endpoints[0].MetricLabels["pod"])
	assert.Len(t, resolve(t, objs, "192.168.1.5:9100").Endpoints, 1, "a host-network pod declaring the port")
	assert.False(t, resolve(t, objs, "192.168.1.5:22").Exists, "the node's other ports are not the pod's")
	assert.False(t, resolve(t, []runtime.Object{done}, "10.0.0.1:8080").Exists)
}

func TestABadOpaquePortsAnnotationMeansNoOpaquePortAsInPolicy(t *testing.T) {
	// One rule for discovery and policy (mesh/ports): a value that does
	// not parse counts as an empty list, as Linkerd's policy controller
	// reads it; the namespace's annotation does not step in.
	objs := []runtime.Object{webSvc(), dt.Namespace("shop", "config.linkerd.io/opaque-ports", "8080"),
		dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0), dt.Annotations("config.linkerd.io/opaque-ports", "nonsense-port")),
		dt.EndpointSlice("shop", "web-a", "web", httpPort, dt.Endpoint("10.0.0.1", "a"))}
	set := resolve(t, objs, web)
	require.Len(t, set.Endpoints, 1)
	assert.NotEqual(t, discovery.HintOpaque, set.Endpoints[0].Hint)
	assert.Zero(t, set.Endpoints[0].OpaqueTransportPort)
}

func TestAPodGetsOnlyTheDefaultOpaquePortsItDeclares(t *testing.T) {
	// 5432 is a default opaque port, but this pod declares only 8080: a
	// connection to its 5432 is not opaque (Linkerd's injector annotates
	// only declared default ports; policy reads the same rule).
	objs := []runtime.Object{dt.Namespace("shop"), dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0))}
	set := resolve(t, objs, "10.0.0.1:5432")
	require.Len(t, set.Endpoints, 1)
	assert.NotEqual(t, discovery.HintOpaque, set.Endpoints[0].Hint)

	objs[1] = dt.Pod("shop", "a", "10.0.0.1", "web", dt.Meshed("weft", 0), dt.ContainerPort("pg", 5432))
	set = resolve(t, objs, "10.0.0.1:5432")
	require.Len(t, set.Endpoints, 1)
	assert.Equal(t, discovery.HintOpaque, set.Endpoints[0].Hint, "declared, so opaque")
}

func TestServiceProfileTranslation(t *testing.T) {
	sp := dt.ServiceProfile("shop", "web.shop.svc.cluster.local")
	sp.Spec.Routes = []spv1alpha2.RouteSpec{{
		Name: "books",
		Condition: &spv1alpha2.RequestMatch{Any: []spv1alpha2.RequestMatch{
			{Method: "get"},
			{Not: &spv1alpha2.RequestMatch{PathRegex: "/admin/.*"}},
		}},
		ResponseClasses: []spv1alpha2.ResponseClass{{Condition: &spv1alpha2.ResponseMatch{All: []spv1alpha2.ResponseMatch{{Status: &spv1alpha2.Range{Min: 500}}}}, IsFailure: true}},
		Timeout:         "1.5s",
	}}
	sp.Spec.DstOverrides = []spv1alpha2.WeightedDst{{Authority: "web-v2.shop.svc.cluster.local:80", Weight: dt.Weight("500m")}}
	p, err := discovery.TranslateServiceProfile(sp)
	require.NoError(t, err)
	require.Len(t, p.Routes, 1)
	r := p.Routes[0]
	assert.Equal(t, 1500*time.Millisecond, r.Timeout)
	require.Len(t, r.Condition.Any, 2)
	assert.Equal(t, "GET", r.Condition.Any[0].Method)
	assert.Equal(t, "/admin/.*", r.Condition.Any[1].Not.PathRegex)
	assert.Equal(t, uint32(500), r.ResponseClasses[0].Condition.All[0].Status.Min)
	assert.Equal(t, []discovery.WeightedDst{{Authority: "web-v2.shop.svc.cluster.local:80", Weight: 5000}}, p.DstOverrides)
	assert.Equal(t, discovery.DefaultRetryBudget(), p.RetryBudget)
	assert.Equal(t, "shop/web.shop.svc.cluster.local", p.Source)
}

func TestServiceProfileTranslationRefusesBadRoutesNamingThem(t *testing.T) {
	deep := &spv1alpha2.RequestMatch{Method: "GET"}
	for range 20 {
		deep = &spv1alpha2.RequestMatch{Not: deep}
	}
	for _, tc := range []struct {
		mod  func(*spv1alpha2.ServiceProfile)
		want string
	}{
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Name = "" }, "spec.routes[0].name: every route needs a name"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Condition = nil }, "spec.routes[0].condition: every route needs a condition"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Condition = &spv1alpha2.RequestMatch{} }, "condition: sets no field"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Condition.PathRegex = "(" }, "condition.pathRegex"},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.Routes[0].Condition.All = []spv1alpha2.RequestMatch{{}, {PathRegex: "["}}
		}, "condition.all[0]: sets no field"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Condition = deep }, "nested deeper"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Timeout = "soon" }, `spec.routes[0].timeout: "soon" is not a duration`},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.Routes[0].ResponseClasses = []spv1alpha2.ResponseClass{{Condition: &spv1alpha2.ResponseMatch{Status: &spv1alpha2.Range{Min: 600}}}}
		}, "responseClasses[0].condition.status"},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.Routes[0].ResponseClasses = []spv1alpha2.ResponseClass{{}}
		}, "responseClasses[0].condition: every response class needs a condition"},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.RetryBudget = &spv1alpha2.RetryBudget{RetryRatio: 0.2, TTL: "-1s"}
		}, "spec.retryBudget.ttl"},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.DstOverrides = []spv1alpha2.WeightedDst{{Authority: "x:80", Weight: dt.Weight("-1")}}
		}, "spec.dstOverrides[0].weight"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.OpaquePorts = []string{"70000"} }, "spec.opaquePorts[0]"},
		{func(sp *spv1alpha2.ServiceProfile) { sp.Spec.Routes[0].Condition.Method = "GE T" }, `spec.routes[0].condition.method: "GE T" is not an HTTP method`},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.RetryBudget = &spv1alpha2.RetryBudget{RetryRatio: float32(math.NaN()), TTL: "10s"}
		}, "spec.retryBudget.retryRatio"},
		{func(sp *spv1alpha2.ServiceProfile) {
			sp.Spec.DstOverrides = []spv1alpha2.WeightedDst{{Authority: "web:99999", Weight: dt.Weight("1")}}
		}, "spec.dstOverrides[0].authority"},
	} {
		sp := dt.ServiceProfile("shop", "web.shop.svc.cluster.local", dt.Route("r", "GET", "/"))
		tc.mod(sp)
		_, err := discovery.TranslateServiceProfile(sp)
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		assert.Contains(t, err.Error(), "ServiceProfile shop/web.shop.svc.cluster.local")
	}
}

func TestServiceProfileNamedOtherThanADNSNameIsRefused(t *testing.T) {
	_, err := discovery.TranslateServiceProfile(dt.ServiceProfile("shop", "Web_Shop", dt.Route("r", "GET", "/")))
	assert.ErrorContains(t, err, "metadata.name: \"Web_Shop\" is not the service's fully qualified DNS name")
}

func TestServiceProfileTranslationNamesEveryInvalidField(t *testing.T) {
	sp := dt.ServiceProfile("shop", "web.shop.svc.cluster.local", dt.Route("r", "GET", "/"))
	sp.Spec.Routes = append(sp.Spec.Routes, spv1alpha2.RouteSpec{Name: "", Condition: &spv1alpha2.RequestMatch{PathRegex: "(("}})
	sp.Spec.RetryBudget = &spv1alpha2.RetryBudget{RetryRatio: -1, TTL: "10x"}
	_, err := discovery.TranslateServiceProfile(sp)
	require.Error(t, err)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var pe *discovery.ProfileError
		require.ErrorAs(t, e, &pe)
		assert.Equal(t, "shop/web.shop.svc.cluster.local", pe.Profile)
		fields = append(fields, pe.Field)
	}
	assert.Equal(t, []string{"spec.routes[1].name", "spec.routes[1].condition.pathRegex", "spec.retryBudget.retryRatio", "spec.retryBudget.ttl"}, fields)
}

func TestInvalidServiceProfileIsServedAsTheDefaultProfile(t *testing.T) {
	bad := dt.ServiceProfile("shop", "web.shop.svc.cluster.local", dt.Route("r", "GET", "(("))
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	require.NoError(t, idx.Upsert(webSvc(), bad))
	conn := dt.Serve(t, idx)
	p := dt.GetProfile(t, conn, web, "").Next(t)
	assert.Empty(t, p.GetRoutes())
	assert.Equal(t, "default", p.GetProfileRef().GetDefault())

	_, err = discovery.ResolveProfile([]runtime.Object{webSvc(), bad}, web, discovery.ContextToken{})
	assert.ErrorContains(t, err, "pathRegex")
}

func TestTwoSlicesListingTheSameAddressPreferTheReadyOne(t *testing.T) {
	objs := []runtime.Object{webSvc(), dt.Pod("shop", "a", "10.0.0.1", "web"),
		dt.EndpointSlice("shop", "web-a", "web", httpPort, dt.Endpoint("10.0.0.1", "a", dt.Terminating(true))),
		dt.EndpointSlice("shop", "web-b", "web", httpPort, dt.Endpoint("10.0.0.1", "a", dt.Zone("z1")))}
	set := resolve(t, objs, web)
	require.Len(t, set.Endpoints, 1)
	assert.Equal(t, "z1", set.Endpoints[0].Zone, "the ready listing wins")
}

func TestIndexRefusesUnsupportedAndIncompleteObjectsWithoutPartialEffect(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	noNS := webSvc()
	noNS.Namespace = ""
	err = idx.Upsert(webSvc(), noNS)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Service "web" without a namespace (object 2 of 2)`)
	err = idx.Upsert(&corev1.ConfigMap{})
	assert.ErrorIs(t, err, discovery.ErrUnsupportedObject)
	err = idx.Replace([]runtime.Object{webSvc(), &discoveryv1.EndpointSlice{}})
	assert.ErrorContains(t, err, "EndpointSlice without a name")
	assert.Zero(t, idx.Stats().Objects["Service"], "nothing was applied")
	_, err = discovery.NewIndex(discovery.WithClusterDomain("not a domain"))
	assert.ErrorContains(t, err, "cluster domain")
	_, err = discovery.NewIndex(discovery.WithControlPlaneNamespace("UPPER"))
	assert.ErrorContains(t, err, "control plane namespace")
}
