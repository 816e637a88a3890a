package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/internal/sourcetest"
	"github.com/weftmesh/weft/mesh/policy/kubernetes"
)

var gvrByKind = map[schema.GroupVersionKind]schema.GroupVersionResource{
	{Group: "policy.linkerd.io", Version: "v1beta3", Kind: "Server"}:                    kubernetes.ServersResource,
	{Group: "policy.linkerd.io", Version: "v1beta1", Kind: "ServerAuthorization"}:       kubernetes.ServerAuthorizationsResource,
	{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "AuthorizationPolicy"}:      kubernetes.AuthorizationPoliciesResource,
	{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "MeshTLSAuthentication"}:    kubernetes.MeshTLSAuthenticationsResource,
	{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "NetworkAuthentication"}:    kubernetes.NetworkAuthenticationsResource,
	{Group: "policy.linkerd.io", Version: "v1beta3", Kind: "HTTPRoute"}:                 kubernetes.HTTPRoutesResource,
	{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "HTTPLocalRateLimitPolicy"}: kubernetes.HTTPLocalRateLimitPoliciesResource,
	{Group: "policy.linkerd.io", Version: "v1alpha1", Kind: "EgressNetwork"}:            kubernetes.EgressNetworksResource,
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}:              kubernetes.GatewayHTTPRoutesResource,
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "GRPCRoute"}:              kubernetes.GRPCRoutesResource,
	{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "TCPRoute"}:         kubernetes.TCPRoutesResource,
	{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Kind: "TLSRoute"}:         kubernetes.TLSRoutesResource,
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "TCPRoute"}:               kubernetes.TCPRoutesV1Resource,
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "TLSRoute"}:               kubernetes.TLSRoutesV1Resource,
}

// harness applies objects through a fake clientset (core kinds) and a
// fake dynamic client (policy and Gateway API kinds).
type harness struct {
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	src    *kubernetes.Source
	have   map[key]runtime.Object
}

type key struct {
	gvk       schema.GroupVersionKind
	namespace string
	name      string
}

func keyOf(o runtime.Object) key {
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	obj := unstructured.Unstructured{Object: u}
	return key{o.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName()}
}

// newHarness starts with the Gateway API route CRDs installed and
// Established, as the shared suite expects their routes to be read.
func newHarness(t *testing.T) *harness {
	h := newBareHarness()
	for _, name := range kubernetes.GatewayAPICRDs {
		require.NoError(t, h.dyn.Tracker().Add(gatewayCRD(name, true)))
	}
	return h
}

// newBareHarness starts with no CRD at all.
func newBareHarness() *harness {
	return &harness{
		client: fake.NewClientset(),
		dyn:    dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kubernetes.ListKinds()),
		have:   map[key]runtime.Object{},
	}
}

func (h *harness) Source() policy.Source { return h.src }

func (h *harness) apply(t *testing.T, o runtime.Object, update bool) {
	t.Helper()
	ctx := testutil.Context(t, 5*time.Second)
	var err error
	switch v := o.(type) {
	case *corev1.Namespace:
		if update {
			_, err = h.client.CoreV1().Namespaces().Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = h.client.CoreV1().Namespaces().Create(ctx, v, metav1.CreateOptions{})
		}
	case *corev1.Pod:
		if update {
			_, err = h.client.CoreV1().Pods(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = h.client.CoreV1().Pods(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		}
	case *corev1.ServiceAccount:
		if update {
			_, err = h.client.CoreV1().ServiceAccounts(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = h.client.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		}
	case *corev1.Service:
		if update {
			_, err = h.client.CoreV1().Services(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
		} else {
			_, err = h.client.CoreV1().Services(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		}
	default:
		gvr, ok := gvrByKind[o.GetObjectKind().GroupVersionKind()]
		require.True(t, ok, "no resource for %v", o.GetObjectKind().GroupVersionKind())
		m, cerr := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		require.NoError(t, cerr)
		u := &unstructured.Unstructured{Object: m}
		if update {
			_, err = h.dyn.Resource(gvr).Namespace(u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = h.dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
		}
	}
	require.NoError(t, err)
}

func (h *harness) remove(t *testing.T, k key) {
	t.Helper()
	ctx := testutil.Context(t, 5*time.Second)
	var err error
	switch k.gvk.Kind {
	case "Namespace":
		err = h.client.CoreV1().Namespaces().Delete(ctx, k.name, metav1.DeleteOptions{})
	case "Pod":
		err = h.client.CoreV1().Pods(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{})
	case "ServiceAccount":
		err = h.client.CoreV1().ServiceAccounts(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{})
	case "Service":
		err = h.client.CoreV1().Services(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{})
	default:
		err = h.dyn.Resource(gvrByKind[k.gvk]).Namespace(k.namespace).Delete(ctx, k.name, metav1.DeleteOptions{})
	}
	require.NoError(t, err)
}

func (h *harness) Set(t *testing.T, objs ...runtime.Object) {
	t.Helper()
	keep := map[key]bool{}
	for _, o := range objs {
		k := keyOf(o)
		keep[k] = true
		_, exists := h.have[k]
		h.apply(t, o.DeepCopyObject(), exists)
		h.have[k] = o
	}
	for k := range h.have {
		if !keep[k] {
			h.remove(t, k)
			delete(h.have, k)
		}
	}
}

func TestKubernetesSourcePassesTheSharedBehaviourSuite(t *testing.T) {
	sourcetest.Run(t, func(t *testing.T, initial ...runtime.Object) sourcetest.Harness {
		h := newHarness(t)
		h.Set(t, initial...)
		src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = src.Close() })
		h.src = src
		return h
	})
}

func TestObjectsWithFieldsThisVersionDoesNotKnowAreSkippedAndReported(t *testing.T) {
	h := newHarness(t)
	h.Set(t, sourcetest.Base()...)
	ap := sourcetest.AuthorizationPolicy()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ap)
	require.NoError(t, err)
	spec := m["spec"].(map[string]any)
	spec["requiredAuthenticationRefz"] = []any{}
	_, err = h.dyn.Resource(kubernetes.AuthorizationPoliciesResource).Namespace(sourcetest.NS).
		Create(testutil.Context(t, 0), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{})
	require.NoError(t, err)

	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	assert.Empty(t, src.Objects().AuthorizationPolicies)
	require.Len(t, src.Errors(), 1)
	assert.ErrorContains(t, src.Errors()[0], "requiredAuthenticationRefz")
}

func TestNewFailsWhenAResourceNeverSyncs(t *testing.T) {
	h := newHarness(t)
	// As when the CRD is not installed: listing it always fails.
	h.dyn.PrependReactor("list", "serverauthorizations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "policy.linkerd.io", Resource: "serverauthorizations"}, "")
	})
	_, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithSyncTimeout(300*time.Millisecond))
	assert.ErrorContains(t, err, "serverauthorizations.policy.linkerd.io did not sync")
}

func TestCloseStopsTheInformers(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
	h := newHarness(t)
	h.Set(t, sourcetest.Base()...)
	src, err := kubernetes.New(context.Background(), h.client, h.dyn, kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, src.Close())
	require.NoError(t, src.Close())
}

func TestWithNamespaceReadsOnlyThatNamespacesObjects(t *testing.T) {
	h := newHarness(t)
	other := sourcetest.Server()
	other.Namespace = "elsewhere"
	otherNS := sourcetest.Namespace(nil)
	otherNS.Name = "elsewhere"
	h.Set(t, append(sourcetest.Base(), otherNS, other)...)

	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithNamespace(sourcetest.NS), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	require.Len(t, src.Objects().Servers, 1)
	assert.Equal(t, sourcetest.NS, src.Objects().Servers[0].Namespace)
	for _, w := range src.Objects().Workloads {
		assert.Equal(t, sourcetest.NS, w.Namespace)
	}
}

// TestNewsContextBoundsTheStartOnly: the informers keep feeding the source
// after the context New was given ends, until Close; that context ending
// during the first lists fails New with its error.
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	h := newHarness(t)
	h.Set(t, sourcetest.Base()...)
	startCtx, endStart := context.WithCancel(context.Background())
	src, err := kubernetes.New(startCtx, h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	endStart()
	require.Len(t, src.Objects().Servers, 1)

	second := sourcetest.Server()
	second.Name = "second"
	h.apply(t, second, false)
	deadline := time.After(10 * time.Second)
	for len(src.Objects().Servers) != 2 {
		select {
		case <-src.Updated():
		case <-deadline:
			t.Fatal("the informers stopped with New's context")
		}
	}

	_, err = kubernetes.New(startCtx, h.client, h.dyn)
	assert.ErrorIs(t, err, context.Canceled, "New with an ended context fails")

	never := newHarness(t)
	never.dyn.PrependReactor("list", "serverauthorizations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "policy.linkerd.io", Resource: "serverauthorizations"}, "")
	})
	shortCtx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = kubernetes.New(shortCtx, never.client, never.dyn, kubernetes.WithSyncTimeout(time.Hour))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the start's context bounds the wait for the first lists")
}
