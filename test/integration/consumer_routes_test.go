//go:build kubeintegration

package integration_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// TestConsumerRoutesCreatedInTheAPIServerAreServedToTheirNamespaceAndAccepted
// is Linkerd's consumer_route and route_with_no_rules against a real API
// server: an HTTPRoute in a consumer namespace whose parent is a Service
// in another is served to clients of the consumer namespace only, and its
// status says the Service accepted it; a policy.linkerd.io HTTPRoute
// written with "rules: []" keeps its empty list (the CRD's default fills
// only an absent field) and is served without rules.
func TestConsumerRoutesCreatedInTheAPIServerAreServedToTheirNamespaceAndAccepted(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	producer := newNamespace(t, c, "producer", nil, nil)
	consumer := newNamespace(t, c, "consumer", nil, nil)
	leaseNS := newNamespace(t, c, "consumer-cp", nil, nil)

	for _, name := range []string{"web", "api"} {
		_, err := c.kube.CoreV1().Services(producer).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	applyYAML(t, c, policykube.GatewayHTTPRoutesResource, consumer, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop-view}
spec:
  parentRefs: [{group: core, kind: Service, namespace: `+producer+`, name: web, port: 80}]
`)
	// Gateway API v1.6.3's HTTPRoute schema wants at least one rule;
	// Linkerd's policy.linkerd.io HTTPRoute (and GRPCRoute) take none.
	noRules := func(apiVersion string) string {
		return "apiVersion: " + apiVersion + "\nkind: HTTPRoute\nmetadata: {name: no-rules}\nspec:\n  parentRefs: [{group: core, kind: Service, name: api, port: 80}]\n  rules: []\n"
	}
	gw := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(noRules("gateway.networking.k8s.io/v1")), &gw.Object))
	_, err := c.dyn.Resource(policykube.GatewayHTTPRoutesResource).Namespace(producer).Create(ctx, gw, metav1.CreateOptions{})
	require.Error(t, err, "the Gateway API schema refuses an HTTPRoute without rules")
	assert.Contains(t, err.Error(), "spec.rules")
	applyYAML(t, c, policykube.HTTPRoutesResource, producer, noRules("policy.linkerd.io/v1beta3"))
	u, err := c.dyn.Resource(policykube.HTTPRoutesResource).Namespace(producer).Get(ctx, "no-rules", metav1.GetOptions{})
	require.NoError(t, err)
	rules, found, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	require.True(t, found, "the API server keeps the empty list")
	require.Empty(t, rules)

	startStatusWriter(t, c, leaseNS, "replica-a")
	waitCondition(t, c, policykube.GatewayHTTPRoutesResource, consumer, "shop-view", "Service", "web", "Accepted", "True/Accepted")

	src, err := policykube.New(ctx, c.kube, c.dyn, policykube.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	runCtx, stop := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(runCtx, src)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	// routes names the HTTP routes (and counts their rules) that a client
	// in ns is served for Service svc's port 80.
	routes := func(svc, ns string) ([]string, []int) {
		p, err := x.Index().OutboundPolicy(policy.OutboundTarget{Namespace: producer, Name: svc, Port: 80, SourceNamespace: ns})
		if err != nil {
			return nil, nil
		}
		var names []string
		var rules []int
		for _, r := range p.GetProtocol().GetDetect().GetHttp1().GetRoutes() {
			if res := r.GetMetadata().GetResource(); res != nil {
				names = append(names, res.GetNamespace()+"/"+res.GetName())
			} else {
				names = append(names, r.GetMetadata().GetDefault())
			}
			rules = append(rules, len(r.GetRules()))
		}
		return names, rules
	}
	testutil.Eventually(t, watchBound, func() bool {
		names, _ := routes("web", consumer)
		return assert.ObjectsAreEqual([]string{consumer + "/shop-view"}, names)
	}, "the consumer namespace's clients get the consumer route")
	for _, ns := range []string{producer, "elsewhere", ""} {
		names, _ := routes("web", ns)
		assert.Equal(t, []string{"http"}, names, "client namespace %q: the default route", ns)
	}
	testutil.Eventually(t, watchBound, func() bool {
		names, _ := routes("api", consumer)
		return assert.ObjectsAreEqual([]string{producer + "/no-rules"}, names)
	}, "the no-rules route is served")
	_, counts := routes("api", producer)
	assert.Equal(t, []int{0}, counts, "served without rules")
}
