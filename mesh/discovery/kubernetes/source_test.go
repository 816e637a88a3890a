package kubernetes_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"github.com/weftmesh/weft/mesh/discovery/kubernetes"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const revAnnotation = "discoverytest.weft.dev/rev"

type harness struct {
	idx    *discovery.Index
	client *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	rev    atomic.Int64
}

func newHarness(t *testing.T, opts ...discovery.Option) *harness {
	t.Helper()
	idx, err := discovery.NewIndex(opts...)
	require.NoError(t, err)
	h := &harness{
		idx:    idx,
		client: fake.NewClientset(),
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{kubernetes.ServiceProfileResource: "ServiceProfileList"}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := kubernetes.New(ctx, idx, h.client, h.dyn)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, src.Close())
		require.NoError(t, idx.Close())
	})
	return h
}

func (h *harness) Index() *discovery.Index { return h.idx }

func kindAndMeta(o runtime.Object) (string, metav1.Object) {
	m, _ := o.(metav1.Object)
	switch o.(type) {
	case *corev1.Service:
		return "Service", m
	case *corev1.Pod:
		return "Pod", m
	case *corev1.Namespace:
		return "Namespace", m
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice", m
	case *spv1alpha2.ServiceProfile:
		return "ServiceProfile", m
	}
	return "", m
}

// Apply writes each object through the fake API server (create, or update
// when it exists), stamped with a revision annotation, and waits until
// the index holds that revision.
func (h *harness) Apply(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		o = o.DeepCopyObject()
		kind, m := kindAndMeta(o)
		rev := strconv.FormatInt(h.rev.Add(1), 10)
		ann := m.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[revAnnotation] = rev
		m.SetAnnotations(ann)
		var err error
		switch v := o.(type) {
		case *corev1.Service:
			if _, err = h.client.CoreV1().Services(v.Namespace).Create(ctx, v, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = h.client.CoreV1().Services(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
			}
		case *corev1.Pod:
			if _, err = h.client.CoreV1().Pods(v.Namespace).Create(ctx, v, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = h.client.CoreV1().Pods(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
			}
		case *corev1.Namespace:
			if _, err = h.client.CoreV1().Namespaces().Create(ctx, v, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = h.client.CoreV1().Namespaces().Update(ctx, v, metav1.UpdateOptions{})
			}
		case *discoveryv1.EndpointSlice:
			if _, err = h.client.DiscoveryV1().EndpointSlices(v.Namespace).Create(ctx, v, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = h.client.DiscoveryV1().EndpointSlices(v.Namespace).Update(ctx, v, metav1.UpdateOptions{})
			}
		case *spv1alpha2.ServiceProfile:
			u := toUnstructured(t, v)
			r := h.dyn.Resource(kubernetes.ServiceProfileResource).Namespace(v.Namespace)
			if _, err = r.Create(ctx, u, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
				_, err = r.Update(ctx, u, metav1.UpdateOptions{})
			}
		default:
			t.Fatalf("harness: cannot apply %T", o)
		}
		require.NoError(t, err, "apply %s %s/%s", kind, m.GetNamespace(), m.GetName())
		testutil.Eventually(t, 0, func() bool {
			got, ok := h.idx.Object(kind, m.GetNamespace(), m.GetName())
			if !ok {
				return false
			}
			gm, _ := got.(metav1.Object)
			return gm.GetAnnotations()[revAnnotation] == rev
		}, fmt.Sprintf("index holds %s %s/%s rev %s", kind, m.GetNamespace(), m.GetName(), rev))
	}
}

// Delete deletes each object through the fake API server and waits until
// the index drops it.
func (h *harness) Delete(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		kind, m := kindAndMeta(o)
		var err error
		switch v := o.(type) {
		case *corev1.Service:
			err = h.client.CoreV1().Services(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{})
		case *corev1.Pod:
			err = h.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{})
		case *corev1.Namespace:
			err = h.client.CoreV1().Namespaces().Delete(ctx, v.Name, metav1.DeleteOptions{})
		case *discoveryv1.EndpointSlice:
			err = h.client.DiscoveryV1().EndpointSlices(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{})
		case *spv1alpha2.ServiceProfile:
			err = h.dyn.Resource(kubernetes.ServiceProfileResource).Namespace(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{})
		default:
			t.Fatalf("harness: cannot delete %T", o)
		}
		require.NoError(t, err, "delete %s %s/%s", kind, m.GetNamespace(), m.GetName())
		testutil.Eventually(t, 0, func() bool {
			_, ok := h.idx.Object(kind, m.GetNamespace(), m.GetName())
			return !ok
		}, fmt.Sprintf("index drops %s %s/%s", kind, m.GetNamespace(), m.GetName()))
	}
}

func toUnstructured(t testing.TB, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

func TestKubernetesSourcePassesTheSourceSuite(t *testing.T) {
	discoverytest.RunSuite(t, func(t *testing.T, opts ...discovery.Option) discoverytest.Harness {
		return newHarness(t, opts...)
	})
}

func TestServiceProfileWithUnknownFieldIsIgnoredAndPreviousVersionKept(t *testing.T) {
	h := newHarness(t)
	sp := discoverytest.ServiceProfile("shop", "web.shop.svc.cluster.local", discoverytest.Route("list", "GET", "/books"))
	h.Apply(t, discoverytest.Namespace("shop"), sp)

	bad := toUnstructured(t, sp)
	// The typo moves the routes under an unknown key: read leniently, this
	// would silently leave the service without routes.
	routes, _, _ := unstructured.NestedSlice(bad.Object, "spec", "routes")
	unstructured.RemoveNestedField(bad.Object, "spec", "routes")
	require.NoError(t, unstructured.SetNestedSlice(bad.Object, routes, "spec", "routs"))
	_, err := h.dyn.Resource(kubernetes.ServiceProfileResource).Namespace("shop").Update(context.Background(), bad, metav1.UpdateOptions{})
	require.NoError(t, err)

	// A later, valid object shows the bad one was seen and skipped.
	h.Apply(t, discoverytest.Namespace("other"))
	got, ok := h.idx.Object("ServiceProfile", "shop", "web.shop.svc.cluster.local")
	require.True(t, ok)
	assert.Len(t, got.(*spv1alpha2.ServiceProfile).Spec.Routes, 1, "the last good ServiceProfile stays in effect")
}

func TestNewFailsWhenInformersCannotSyncBeforeTheDeadline(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = kubernetes.New(ctx, idx, fake.NewClientset(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not sync")
}

func TestPodsAreTrimmedToWhatDiscoveryReads(t *testing.T) {
	h := newHarness(t)
	p := discoverytest.Pod("shop", "web-1", "10.0.0.1", "web", discoverytest.Meshed("weft", 4143))
	p.Spec.Volumes = []corev1.Volume{{Name: "data"}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "SECRET", Value: "hunter2"}}
	h.Apply(t, p)
	got, ok := h.idx.Object("Pod", "shop", "web-1")
	require.True(t, ok)
	gp := got.(*corev1.Pod)
	assert.Empty(t, gp.Spec.Volumes)
	assert.Empty(t, gp.Spec.Containers[0].Env, "only the proxy's inbound address is kept")
	assert.Equal(t, "0.0.0.0:4143", gp.Spec.Containers[1].Env[0].Value)
	assert.Equal(t, "web", gp.Spec.ServiceAccountName)
}

func TestUpdatedSignalsAfterAChangeReachesTheIndex(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	client := fake.NewClientset()
	src, err := kubernetes.New(testutil.Context(t, 0), idx, client, nil, kubernetes.WithResync(time.Hour))
	require.NoError(t, err)
	defer src.Close()
	svc := discoverytest.Service("shop", "web", "10.96.0.10")
	ctx := testutil.Context(t, 0)
	_, err = client.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	// Signals coalesce and the initial sync may still have one pending:
	// wait for a signal after which the Service is in the index.
	for {
		select {
		case <-src.Updated():
			if _, ok := idx.Object("Service", "shop", "web"); ok {
				return
			}
		case <-ctx.Done():
			t.Fatal("no update signal with the new Service in the index")
		}
	}
}

// TestNewsContextBoundsTheStartOnly: changes keep reaching the index after
// the context New was given ends, until Close (TestMain's goleak checks
// nothing is left running).
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	defer idx.Close()
	client := fake.NewClientset()
	startCtx, endStart := context.WithCancel(context.Background())
	src, err := kubernetes.New(startCtx, idx, client, nil)
	require.NoError(t, err)
	defer src.Close()
	endStart()

	ctx := testutil.Context(t, 0)
	_, err = client.CoreV1().Services("shop").Create(ctx, discoverytest.Service("shop", "web", "10.96.0.10"), metav1.CreateOptions{})
	require.NoError(t, err)
	testutil.Eventually(t, 0, func() bool {
		_, ok := idx.Object("Service", "shop", "web")
		return ok
	}, "the Service created after New's context ended to reach the index")
}
