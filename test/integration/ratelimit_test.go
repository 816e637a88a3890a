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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// An HTTPLocalRateLimitPolicy created in a real API server (installed
// from Weft's CRD, with strict field validation) reaches the index through
// a real watch and is served for its Server's port; the API server fills
// in creationTimestamp, which decides between two policies; deleting the
// one that applies hands the Server to the other.
func TestARateLimitPolicyCreatedInTheAPIServerIsServedForItsServer(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 2*time.Minute)
	ns := newNamespace(t, c, "ratelimit", nil, map[string]string{"linkerd.io/inject": "enabled"})

	_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod, err := c.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{
			Name: "web", Image: "example.com/web:1", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.30", PodIPs: []corev1.PodIP{{IP: "10.1.0.30"}}}
	_, err = c.kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)

	create := func(gvr schema.GroupVersionResource, obj runtime.Object) {
		t.Helper()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		_, err = c.dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s", u.GetName())
	}
	create(policykube.ServersResource, &policyv1beta3.Server{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta3", Kind: "Server"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-http", Namespace: ns},
		Spec: policyv1beta3.ServerSpec{
			PodSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Port:          intstr.FromString("http"),
			ProxyProtocol: policyv1beta3.ProxyProtocolHTTP1,
		},
	})
	rl := func(name string, total int64) *policyv1alpha1.HTTPLocalRateLimitPolicy {
		return &policyv1alpha1.HTTPLocalRateLimitPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "HTTPLocalRateLimitPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1alpha1.HTTPLocalRateLimitPolicySpec{
				TargetRef: policyv1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"},
				Total:     &policyv1alpha1.Limit{RequestsPerSecond: total},
				Identity:  &policyv1alpha1.Limit{RequestsPerSecond: 10},
				Overrides: []policyv1alpha1.Override{{RequestsPerSecond: 20, ClientRefs: []policyv1alpha1.NamespacedTargetRef{
					{Kind: "ServiceAccount", Name: "client", Namespace: &ns}}}},
			},
		}
	}
	create(policykube.HTTPLocalRateLimitPoliciesResource, rl("first", 100))

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

	web := policy.WorkloadRef{Namespace: ns, Kind: "pod", Name: "web-0"}
	served := func() *authz.RateLimit {
		srv, ok := x.Index().Lookup(web, 8080)
		if !ok {
			return nil
		}
		return srv.RateLimit
	}
	waitFor(t, time.Now(), x.Updated(), func() bool { rl := served(); return rl != nil && rl.Meta.Name == "first" }, "the first policy served")
	got := served()
	assert.Equal(t, uint32(100), got.Total)
	assert.Equal(t, uint32(10), got.Identity)
	require.Len(t, got.Overrides, 1)
	assert.Equal(t, []string{"client." + ns + ".serviceaccount.identity.weft.cluster.local"}, got.Overrides[0].Identities)

	// A second policy for the same Server, created later: the API server
	// stamps it no earlier than the first, and on a tie of the
	// second-resolution stamps the names decide ("first" < "zz-second"),
	// so the first keeps applying either way.
	create(policykube.HTTPLocalRateLimitPoliciesResource, rl("zz-second", 50))
	waitFor(t, time.Now(), x.Updated(), func() bool {
		for _, p := range x.Index().Problems() {
			if p.Object.Name == "zz-second" && p.Field == "spec.targetRef" {
				return true
			}
		}
		return false
	}, "the second policy reported as not applied")
	assert.Equal(t, "first", served().Meta.Name)

	// A policy the webhook would refuse, created with the webhook off: the
	// index reports it and ignores it.
	create(policykube.HTTPLocalRateLimitPoliciesResource, rl("aa-invalid", 0))
	waitFor(t, time.Now(), x.Updated(), func() bool {
		for _, p := range x.Index().Errors() {
			if p.Object.Name == "aa-invalid" && p.Field == "spec.total.requestsPerSecond" {
				return true
			}
		}
		return false
	}, "the invalid policy reported")
	assert.Equal(t, "first", served().Meta.Name)

	require.NoError(t, c.dyn.Resource(policykube.HTTPLocalRateLimitPoliciesResource).Namespace(ns).Delete(ctx, "first", metav1.DeleteOptions{}))
	waitFor(t, time.Now(), x.Updated(), func() bool { rl := served(); return rl != nil && rl.Meta.Name == "zz-second" }, "the second policy takes over")
	assert.Equal(t, uint32(50), served().Total)
	assert.Empty(t, src.Errors(), "objects the policy source could not convert")
}
