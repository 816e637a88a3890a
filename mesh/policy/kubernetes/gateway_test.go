package kubernetes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/internal/sourcetest"
	"github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// gatewayCRD is the CRD of a Gateway API route kind as the API server
// stores it once accepted: serving v1, and Established when established.
func gatewayCRD(name string, established bool) *unstructured.Unstructured {
	plural, _, _ := strings.Cut(name, ".")
	kinds := map[string]string{"httproutes": "HTTPRoute", "grpcroutes": "GRPCRoute", "tcproutes": "TCPRoute", "tlsroutes": "TLSRoute"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "gateway.networking.k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kinds[plural]},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true},
				{Name: "v1beta1", Served: true},
			},
		},
	}
	if plural == "tcproutes" || plural == "tlsroutes" {
		// As the experimental channels before Gateway API v1.5, which
		// Linkerd's docs install: v1alpha2 only (the fake dynamic
		// client converts nothing between versions).
		crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha2", Served: true, Storage: true}}
	}
	if established {
		crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{
			{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
			{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
		}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// waitUntil re-checks cond each time the source publishes, failing after
// a generous bound.
func waitUntil(t *testing.T, src *kubernetes.Source, cond func() bool, what string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-src.Updated():
		case <-deadline.C:
			t.Fatalf("%s: not seen", what)
		}
	}
}

func TestGatewayRoutesArePickedUpWhenTheirCRDAppearsAndDroppedWhenItIsDeleted(t *testing.T) {
	h := newBareHarness()
	route, ap := sourcetest.AdminRoute()
	h.Set(t, append(sourcetest.Base(), ap)...)
	reg := prometheus.NewRegistry()
	m, err := policy.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond),
		kubernetes.WithSyncTimeout(5*time.Second), kubernetes.WithMetrics(m))
	require.NoError(t, err)
	defer src.Close()

	const crd = "httproutes.gateway.networking.k8s.io"
	assert.Equal(t, map[string]bool{crd: false, "grpcroutes.gateway.networking.k8s.io": false,
		"tcproutes.gateway.networking.k8s.io": false, "tlsroutes.gateway.networking.k8s.io": false}, src.GatewayAPIWatched())
	assert.Equal(t, 0.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", crd))

	// The CRD arrives, not yet Established: nothing is watched.
	ctx := testutil.Context(t, 5*time.Second)
	crds := h.dyn.Resource(kubernetes.CustomResourceDefinitionsResource)
	_, err = crds.Create(ctx, gatewayCRD(crd, false), metav1.CreateOptions{})
	require.NoError(t, err)
	// A route already stored (the fake keeps it without a CRD; the API
	// server would accept it once the CRD is Established).
	h.Set(t, append(sourcetest.Base(), ap, route)...)
	// Established: the route is read without a restart.
	_, err = crds.Update(ctx, gatewayCRD(crd, true), metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil(t, src, func() bool { return len(src.Objects().GatewayHTTPRoutes) == 1 }, "the HTTPRoute after its CRD was Established")
	assert.True(t, src.GatewayAPIWatched()[crd])
	assert.False(t, src.GatewayAPIWatched()["grpcroutes.gateway.networking.k8s.io"])
	assert.Equal(t, 1.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", crd))
	assert.Equal(t, 0.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", "grpcroutes.gateway.networking.k8s.io"))

	// Routes created afterwards arrive through the new informer.
	second := route.DeepCopy()
	second.Name = "web-admin-2"
	h.apply(t, second, false)
	waitUntil(t, src, func() bool { return len(src.Objects().GatewayHTTPRoutes) == 2 }, "a second HTTPRoute")

	// The CRD is deleted: its routes leave the snapshot (the fake keeps
	// them stored, so only the source can have dropped them).
	require.NoError(t, crds.Delete(ctx, crd, metav1.DeleteOptions{}))
	waitUntil(t, src, func() bool { return len(src.Objects().GatewayHTTPRoutes) == 0 }, "the HTTPRoutes gone with their CRD")
	assert.False(t, src.GatewayAPIWatched()[crd])
	assert.Equal(t, 0.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", crd))

	// And come back with it.
	_, err = crds.Create(ctx, gatewayCRD(crd, true), metav1.CreateOptions{})
	require.NoError(t, err)
	waitUntil(t, src, func() bool { return len(src.Objects().GatewayHTTPRoutes) == 2 }, "the HTTPRoutes back with their CRD")
}

func TestGatewayRoutesOfACRDBeingDeletedLeaveTheSnapshot(t *testing.T) {
	h := newHarness(t)
	route, ap := sourcetest.AdminRoute()
	h.Set(t, append(sourcetest.Base(), ap, route)...)
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	require.Len(t, src.Objects().GatewayHTTPRoutes, 1, "the CRDs were there at start")

	crd := gatewayCRD("httproutes.gateway.networking.k8s.io", true)
	now := metav1.Now()
	crd.SetDeletionTimestamp(&now)
	_, err = h.dyn.Resource(kubernetes.CustomResourceDefinitionsResource).Update(testutil.Context(t, 5*time.Second), crd, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil(t, src, func() bool { return len(src.Objects().GatewayHTTPRoutes) == 0 }, "the HTTPRoute dropped while its CRD terminates")
}

func TestRequiredGatewayAPIFailsNewWithoutTheCRDs(t *testing.T) {
	h := newBareHarness()
	h.Set(t, sourcetest.Base()...)
	_, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithGatewayAPI(kubernetes.GatewayAPIRequired), kubernetes.WithSyncTimeout(5*time.Second))
	require.Error(t, err)
	assert.ErrorContains(t, err, "httproutes.gateway.networking.k8s.io: the CRD is not installed")

	// Installed but serving only a version this build does not read.
	h = newHarness(t)
	h.Set(t, sourcetest.Base()...)
	crd := gatewayCRD("grpcroutes.gateway.networking.k8s.io", true)
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, []any{map[string]any{"name": "v1alpha2", "served": true, "storage": true}}, "spec", "versions"))
	_, err = h.dyn.Resource(kubernetes.CustomResourceDefinitionsResource).Update(testutil.Context(t, 5*time.Second), crd, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithGatewayAPI(kubernetes.GatewayAPIRequired), kubernetes.WithSyncTimeout(5*time.Second))
	assert.ErrorContains(t, err, "grpcroutes.gateway.networking.k8s.io: the CRD does not serve version v1")
}

func TestRequiredGatewayAPIStartsWithTheCRDsInstalled(t *testing.T) {
	h := newHarness(t)
	route, ap := sourcetest.AdminRoute()
	h.Set(t, append(sourcetest.Base(), ap, route)...)
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithGatewayAPI(kubernetes.GatewayAPIRequired), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	assert.Len(t, src.Objects().GatewayHTTPRoutes, 1)
	assert.Equal(t, map[string]bool{"httproutes.gateway.networking.k8s.io": true, "grpcroutes.gateway.networking.k8s.io": true,
		"tcproutes.gateway.networking.k8s.io": true, "tlsroutes.gateway.networking.k8s.io": true}, src.GatewayAPIWatched())
}

func TestRequiredGatewayAPIDoesNotRequireTheExperimentalTCPRouteAndTLSRouteCRDs(t *testing.T) {
	h := newBareHarness()
	h.Set(t, sourcetest.Base()...)
	for _, name := range []string{"httproutes.gateway.networking.k8s.io", "grpcroutes.gateway.networking.k8s.io"} {
		require.NoError(t, h.dyn.Tracker().Add(gatewayCRD(name, true)))
	}
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithGatewayAPI(kubernetes.GatewayAPIRequired), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	assert.False(t, src.GatewayAPIWatched()["tcproutes.gateway.networking.k8s.io"])
	assert.False(t, src.GatewayAPIWatched()["tlsroutes.gateway.networking.k8s.io"])
}

// TestTLSRoutesAreReadAtV1OnceTheirCRDServesIt follows a TLSRoute CRD
// from v1alpha2 only (the experimental channels before v1.5) to one
// serving v1 as well: the source then reads v1 (the fake dynamic client
// keeps each version's objects apart, so which routes arrive says which
// version is watched).
func TestTLSRoutesAreReadAtV1OnceTheirCRDServesIt(t *testing.T) {
	h := newHarness(t)
	alpha := sourcetest.TLSRoute("alpha", []string{"a.example.com"}, sourcetest.StreamParentRef("Service", "web", 443))
	v1 := &gatewayv1.TLSRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "TLSRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "stable", Namespace: sourcetest.NS},
		Spec: gatewayv1.TLSRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{sourcetest.StreamParentRef("Service", "web", 443)}},
			Hostnames: []gatewayv1.Hostname{"b.example.com"}, Rules: []gatewayv1.TLSRouteRule{{}}},
	}
	h.Set(t, append(sourcetest.Base(), alpha, v1)...)
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithDebounce(5*time.Millisecond), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	names := func() []string {
		var out []string
		for _, r := range src.Objects().TLSRoutes {
			out = append(out, r.Name)
		}
		return out
	}
	require.Equal(t, []string{"alpha"}, names(), "the CRD serves v1alpha2 only")
	assert.Equal(t, "gateway.networking.k8s.io/v1", src.Objects().TLSRoutes[0].APIVersion, "converted to the one form policy reads")

	crd := gatewayCRD("tlsroutes.gateway.networking.k8s.io", true)
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, []any{
		map[string]any{"name": "v1", "served": true, "storage": true},
		map[string]any{"name": "v1alpha2", "served": true, "storage": false},
	}, "spec", "versions"))
	_, err = h.dyn.Resource(kubernetes.CustomResourceDefinitionsResource).Update(testutil.Context(t, 5*time.Second), crd, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitUntil(t, src, func() bool { n := names(); return len(n) == 1 && n[0] == "stable" }, "the v1 TLSRoute once the CRD serves v1")
	assert.True(t, src.GatewayAPIWatched()["tlsroutes.gateway.networking.k8s.io"])
}

func TestGatewayAPIOffReadsNeitherTheCRDsNorTheRoutes(t *testing.T) {
	h := newHarness(t)
	route, ap := sourcetest.AdminRoute()
	h.Set(t, append(sourcetest.Base(), ap, route)...)
	// As without RBAC on CRDs and routes: any such list fails.
	for _, res := range []string{"customresourcedefinitions", "httproutes", "grpcroutes", "tcproutes", "tlsroutes"} {
		h.dyn.PrependReactor("list", res, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetResource().Group == "policy.linkerd.io" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: a.GetResource().Group, Resource: res}, "", nil)
		})
	}
	src, err := kubernetes.New(testutil.Context(t, 0), h.client, h.dyn, kubernetes.WithoutGatewayAPI(), kubernetes.WithSyncTimeout(5*time.Second))
	require.NoError(t, err)
	defer src.Close()
	assert.Empty(t, src.Objects().GatewayHTTPRoutes)
	assert.Empty(t, src.GatewayAPIWatched())
}

func TestParseGatewayAPIMode(t *testing.T) {
	for in, want := range map[string]kubernetes.GatewayAPIMode{"auto": kubernetes.GatewayAPIAuto, "true": kubernetes.GatewayAPIRequired, "false": kubernetes.GatewayAPIOff} {
		got, err := kubernetes.ParseGatewayAPIMode(in)
		require.NoError(t, err)
		assert.Equal(t, want, got, in)
	}
	_, err := kubernetes.ParseGatewayAPIMode("yes")
	assert.ErrorContains(t, err, `"yes": want auto, true or false`)
	_, err = kubernetes.New(context.Background(), newBareHarness().client, newBareHarness().dyn, kubernetes.WithGatewayAPI(kubernetes.GatewayAPIMode(7)))
	assert.ErrorContains(t, err, "unknown Gateway API mode 7")
}
