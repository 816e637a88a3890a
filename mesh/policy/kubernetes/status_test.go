package kubernetes_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/internal/sourcetest"
	"github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// ourCondition reads the condition typ of Weft's entry for the parent
// named parent from the route as the (fake) API server holds it.
func ourCondition(t *testing.T, h *harness, gvr schema.GroupVersionResource, name, parent, typ string) (gatewayv1.RouteStatus, string) {
	t.Helper()
	u, err := h.dyn.Resource(gvr).Namespace(sourcetest.NS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var st gatewayv1.RouteStatus
	if m, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st))
	}
	for _, p := range st.Parents {
		if string(p.ControllerName) != policy.ControllerName || string(p.ParentRef.Name) != parent {
			continue
		}
		for _, c := range p.Conditions {
			if c.Type == typ {
				return st, string(c.Status) + "/" + c.Reason
			}
		}
	}
	return st, ""
}

func TestStatusWriterWritesEachRouteOnceAndKeepsOtherControllersEntries(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
	h := newHarness(t)
	admin, _ := sourcetest.AdminRoute()
	gw := gatewayv1.Group(gatewayv1.GroupName)
	kind := gatewayv1.Kind("Gateway")
	foreign := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Group: &gw, Kind: &kind, Name: "edge"},
		ControllerName: "example.com/gateway-controller",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}},
	}
	admin.Spec.ParentRefs = append(admin.Spec.ParentRefs, gatewayv1.ParentReference{Name: "edge"})
	admin.Status.Parents = []gatewayv1.RouteParentStatus{foreign}
	orphan, _ := sourcetest.AdminRoute()
	orphan.Name = "orphan"
	orphan.Spec.ParentRefs[0].Name = "nope"
	h.Set(t, append(sourcetest.Base(), admin, orphan)...)

	ctx, cancel := context.WithCancel(context.Background())
	src, err := kubernetes.New(ctx, h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	var passes, writes atomic.Int64
	w, err := kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusResync(10*time.Millisecond),
		kubernetes.WithStatusPassHook(func(n, failed int) {
			assert.Zero(t, failed)
			writes.Add(int64(n))
			passes.Add(1)
		}))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = x.Run(ctx) }()
	go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
	defer func() {
		cancel()
		wg.Wait()
		_ = src.Close()
	}()

	testutil.Eventually(t, 0, func() bool {
		_, a := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "web-admin", "web-http", "Accepted")
		_, o := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "orphan", "nope", "Accepted")
		return a == "True/Accepted" && o == "False/NoMatchingParent"
	}, "both routes' status written")
	st, _ := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "web-admin", "web-http", "Accepted")
	require.Len(t, st.Parents, 2, "the gateway's entry and Weft's, nothing for the Gateway parent")
	assert.Equal(t, "example.com/gateway-controller", string(st.Parents[0].ControllerName))
	assert.True(t, st.Parents[0].Conditions[0].LastTransitionTime.Equal(&foreign.Conditions[0].LastTransitionTime), "the other controller's entry is kept as it was")

	// Once the informers have brought the written statuses back, passes
	// (every 10ms) write nothing more.
	testutil.Eventually(t, 0, func() bool {
		for _, s := range x.Index().RouteStatuses() {
			if _, changed := s.Merge(time.Now()); changed {
				return false
			}
		}
		return true
	}, "the index to see the written statuses")
	// A pass that was under way when the index settled may still write
	// from the older index; let two passes go by before counting.
	p0 := passes.Load()
	testutil.Eventually(t, 0, func() bool { return passes.Load() >= p0+2 }, "two passes")
	settled, p := writes.Load(), passes.Load()
	testutil.Eventually(t, 0, func() bool { return passes.Load() >= p+5 }, "five more passes")
	assert.Equal(t, settled, writes.Load(), "no write when nothing changed")
	// (The fake API server does not refuse a write computed from an old
	// resourceVersion, as a real one does, so a route may have been
	// written twice before the informers caught up.)
	assert.GreaterOrEqual(t, settled, int64(2))
}

func TestStatusWriterRefusesIncompleteOptions(t *testing.T) {
	h := newHarness(t)
	x, err := policy.NewIndexer(context.Background(), policy.NewMemorySource(nil))
	require.NoError(t, err)
	_, err = kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusLease(nil, "weft", "a"))
	assert.ErrorContains(t, err, "lease needs a client")
	_, err = kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusLease(h.client, "weft", ""))
	assert.ErrorContains(t, err, "lease needs")
	_, err = kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusResync(0))
	assert.ErrorContains(t, err, "not positive")
	_, err = kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusLeaseDuration(time.Second))
	assert.ErrorContains(t, err, "under 3s")
	_, err = kubernetes.NewStatusWriter(nil, x)
	assert.Error(t, err)
}

// egressCondition reads the Accepted condition of an EgressNetwork as the
// (fake) API server holds it: "Status/Reason", or "".
func egressCondition(t *testing.T, h *harness, name string) (metav1.Condition, []metav1.Condition) {
	t.Helper()
	u, err := h.dyn.Resource(kubernetes.EgressNetworksResource).Namespace(sourcetest.NS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var st v1alpha1.EgressNetworkStatus
	if m, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st))
	}
	for _, c := range st.Conditions {
		if c.Type == "Accepted" {
			return c, st.Conditions
		}
	}
	return metav1.Condition{}, st.Conditions
}

func TestStatusWriterWritesEgressNetworkStatusAndTheStatusOfTheirRoutes(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
	h := newHarness(t)
	meta := metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "EgressNetwork"}
	internet := &v1alpha1.EgressNetwork{TypeMeta: meta, ObjectMeta: metav1.ObjectMeta{Name: "internet", Namespace: sourcetest.NS, Generation: 2},
		Spec: v1alpha1.EgressNetworkSpec{TrafficPolicy: v1alpha1.TrafficPolicyAllow},
		// Another controller's condition, kept as it is.
		Status: &v1alpha1.EgressNetworkStatus{Conditions: []metav1.Condition{{Type: "example.com/Audited", Status: metav1.ConditionTrue, Reason: "Audited",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}}}
	overlap := &v1alpha1.EgressNetwork{TypeMeta: meta, ObjectMeta: metav1.ObjectMeta{Name: "overlap", Namespace: sourcetest.NS},
		Spec: v1alpha1.EgressNetworkSpec{TrafficPolicy: v1alpha1.TrafficPolicyDeny, Networks: []v1alpha1.Network{{Cidr: "10.0.0.0/8"}}}}
	route := func(name, parent string) *gatewayv1.HTTPRoute {
		group, kind, port := gatewayv1.Group("policy.linkerd.io"), gatewayv1.Kind("EgressNetwork"), gatewayv1.PortNumber(443)
		return &gatewayv1.HTTPRoute{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sourcetest.NS},
			Spec:       gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &group, Kind: &kind, Name: gatewayv1.ObjectName(parent), Port: &port}}}}}
	}
	h.Set(t, append(sourcetest.Base(), internet, overlap, route("to-internet", "internet"), route("to-overlap", "overlap"))...)

	ctx, cancel := context.WithCancel(context.Background())
	src, err := kubernetes.New(ctx, h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	w, err := kubernetes.NewStatusWriter(h.dyn, x, kubernetes.WithStatusResync(10*time.Millisecond),
		kubernetes.WithStatusPassHook(func(_, failed int) { assert.Zero(t, failed) }))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = x.Run(ctx) }()
	go func() { defer wg.Done(); assert.NoError(t, w.Run(ctx)) }()
	defer func() {
		cancel()
		wg.Wait()
		_ = src.Close()
	}()

	testutil.Eventually(t, 0, func() bool {
		a, _ := egressCondition(t, h, "internet")
		b, _ := egressCondition(t, h, "overlap")
		_, ra := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "to-internet", "internet", "Accepted")
		_, rb := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "to-overlap", "overlap", "Accepted")
		return a.Reason == "Accepted" && b.Reason == policy.ReasonEgressNetworkOverlap && ra == "True/Accepted" && rb == "False/NoMatchingParent"
	}, "the EgressNetworks' and their routes' status written")
	a, all := egressCondition(t, h, "internet")
	assert.Equal(t, metav1.ConditionTrue, a.Status)
	assert.Equal(t, int64(2), a.ObservedGeneration)
	require.Len(t, all, 2, "the other controller's condition and Weft's")
	assert.Equal(t, "example.com/Audited", all[0].Type)
	b, _ := egressCondition(t, h, "overlap")
	assert.Equal(t, metav1.ConditionFalse, b.Status)
	assert.Equal(t, "networks overlap with clusterNetworks", b.Message)
	_, rr := ourCondition(t, h, kubernetes.GatewayHTTPRoutesResource, "to-internet", "internet", "ResolvedRefs")
	assert.Equal(t, "True/ResolvedRefs", rr)

	// Once the informers bring the written status back, nothing is left
	// to write.
	testutil.Eventually(t, 0, func() bool {
		for _, s := range x.Index().EgressNetworkStatuses() {
			if _, changed := s.Merge(time.Now()); changed {
				return false
			}
		}
		return true
	}, "the index to see the written EgressNetwork status")
}
