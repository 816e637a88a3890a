//go:build kubeintegration

package integration_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/crds"
	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/kubeenv"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// TestPolicyControllerPicksUpGatewayAPIRoutesWhenTheirCRDsAreInstalledLater
// is issue 29 item 3: the policy source and index start on a cluster that
// has never had the Gateway API CRDs; the CRDs are then installed (from
// `weft install --crds --gateway-api`'s copies), a GRPCRoute with a
// route-scoped AuthorizationPolicy is applied, and the index admits the
// authorized caller on that route without a restart; deleting the CRD
// takes the route and its authorization away again.
//
// It runs its own control plane: the package's shared one has the Gateway
// API CRDs installed by other tests.
func TestPolicyControllerPicksUpGatewayAPIRoutesWhenTheirCRDsAreInstalledLater(t *testing.T) {
	cluster(t) // skips without binaries, as every test here
	e := kubeenv.New(t, kubeenv.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	cfg := e.Config()
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	ext, err := apiextclient.NewForConfig(cfg)
	require.NoError(t, err)
	c := clients{kube: kube, dyn: dyn, apiext: ext}
	ctx := timeout(t, 3*time.Minute)

	// Weft's CRDs only.
	ours, err := crds.All()
	require.NoError(t, err)
	for _, crd := range ours {
		_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, crd.Name)
	}
	for _, crd := range ours {
		require.NoError(t, waitEstablished(ctx, c, crd.Name))
	}

	// A meshed gRPC workload with a Server that denies by default.
	ns := newNamespace(t, c, "gwlive", nil, map[string]string{"linkerd.io/inject": "enabled"})
	for _, sa := range []string{"web", "client"} {
		_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{
			Name: "web", Image: "example.com/web:1", Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 8080}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.0.20", PodIPs: []corev1.PodIP{{IP: "10.1.0.20"}}}
	_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	create := func(gvr schema.GroupVersionResource, obj runtime.Object) {
		t.Helper()
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s", u.GetName())
	}
	create(policykube.ServersResource, &policyv1beta3.Server{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta3", Kind: "Server"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-grpc", Namespace: ns},
		Spec: policyv1beta3.ServerSpec{
			PodSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Port:          intstr.FromString("grpc"),
			ProxyProtocol: policyv1beta3.ProxyProtocolGRPC,
		},
	})
	// The route-scoped policy exists before its route, as when a user
	// applies Linkerd's restricting-access tutorial in one go.
	create(policykube.AuthorizationPoliciesResource, &policyv1alpha1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "ping-client", Namespace: ns},
		Spec: policyv1alpha1.AuthorizationPolicySpec{
			TargetRef:                  policyv1alpha1.TargetRef{Group: "gateway.networking.k8s.io", Kind: "GRPCRoute", Name: "ping"},
			RequiredAuthenticationRefs: []policyv1alpha1.NamespacedTargetRef{{Kind: "ServiceAccount", Name: "client"}},
		},
	})

	// The source and index, as the policy controller runs them
	// (--gateway-api auto, the default).
	reg := prometheus.NewRegistry()
	metrics, err := policy.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	src, err := policykube.New(ctx, kube, dyn, policykube.WithDebounce(10*time.Millisecond), policykube.WithMetrics(metrics))
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	runCtx, stop := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(runCtx, src, policy.WithMetrics(metrics))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	const grpcCRD = "grpcroutes.gateway.networking.k8s.io"
	assert.False(t, src.GatewayAPIWatched()[grpcCRD])
	assert.Equal(t, 0.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", grpcCRD))
	ping := &authz.Request{Method: "POST", Path: "/weft.test.Pinger/Ping", Header: http.Header{"Content-Type": {"application/grpc"}}}
	// decision is "allow" or "deny", or the evaluation's error.
	decision := func(sa string) string {
		res, err := x.Index().Evaluate(policy.Request{
			Workload: policy.WorkloadRef{Namespace: ns, Kind: "pod", Name: "web-0"},
			Port:     intstr.FromInt32(8080),
			Client:   policy.Client{ServiceAccount: sa, Namespace: ns},
			HTTP:     ping,
		})
		if err != nil {
			return err.Error()
		}
		return res.Decision.String()
	}
	waitFor(t, time.Now(), x.Updated(), func() bool { return decision("client") == "deny" }, "the Server denying before any route")

	// The Gateway API CRDs arrive, as `weft install --crds --gateway-api`
	// prints them.
	gw, err := crds.GatewayAPI()
	require.NoError(t, err)
	for _, crd := range gw {
		_, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		require.NoError(t, err, crd.Name)
	}
	for _, crd := range gw {
		require.NoError(t, waitEstablished(ctx, c, crd.Name))
	}
	// Then the route, once the API server serves it.
	method := "Ping"
	service := "weft.test.Pinger"
	exact := gatewayv1.GRPCMethodMatchExact
	group := gatewayv1.Group("policy.linkerd.io")
	kind := gatewayv1.Kind("Server")
	route := &gatewayv1.GRPCRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "GRPCRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "ping", Namespace: ns},
		Spec: gatewayv1.GRPCRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &group, Kind: &kind, Name: "web-grpc"}}},
			Rules: []gatewayv1.GRPCRouteRule{{Matches: []gatewayv1.GRPCRouteMatch{{Method: &gatewayv1.GRPCMethodMatch{
				Type: &exact, Service: &service, Method: &method,
			}}}}},
		},
	}
	create(policykube.GRPCRoutesResource, route)

	start := time.Now()
	took := waitFor(t, start, x.Updated(), func() bool { return decision("client") == "allow" }, "the GRPCRoute admitting client, without a restart")
	t.Logf("GRPCRoute applied after its CRD -> admitted by the index in %s", took.Round(time.Millisecond))
	assert.Equal(t, "deny", decision("web"), "another service account stays denied on the route")
	assert.True(t, src.GatewayAPIWatched()[grpcCRD])
	assert.Equal(t, 1.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", grpcCRD))
	assert.Empty(t, src.Errors())

	// The other kinds' informers list on their own time once their CRDs
	// are served (four CRDs now, the API server may serve the last ones
	// later): the HTTPRoutes are watched before the GRPCRoute CRD goes, so
	// that the check below is about the deletion.
	waitFor(t, time.Now(), x.Updated(), func() bool { return src.GatewayAPIWatched()["httproutes.gateway.networking.k8s.io"] }, "the HTTPRoutes watched too")

	// The CRD goes (and with it the route): the authorization goes too.
	require.NoError(t, ext.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, grpcCRD, metav1.DeleteOptions{}))
	waitFor(t, time.Now(), x.Updated(), func() bool { return decision("client") == "deny" }, "the route gone with its CRD")
	waitFor(t, time.Now(), x.Updated(), func() bool { return !src.GatewayAPIWatched()[grpcCRD] }, "the GRPCRoutes no longer watched")
	assert.Empty(t, src.Objects().GRPCRoutes)
	assert.Equal(t, 0.0, testutil.GaugeValue(t, reg, "weft_policy_gateway_api_watched", "resource", grpcCRD))
	assert.True(t, src.GatewayAPIWatched()["httproutes.gateway.networking.k8s.io"], "the other kind stays watched: %v", src.GatewayAPIWatched())
}
