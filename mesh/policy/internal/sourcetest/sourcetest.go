// Package sourcetest is the behaviour suite every policy.Source backend
// must pass: the same objects, changed the same way, must lead to the
// same decisions and the same Inbound API updates, whether they come
// from files (mesh/policy/static) or from a cluster
// (mesh/policy/kubernetes).
package sourcetest

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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Harness drives one backend.
type Harness interface {
	// Source is the backend under test.
	Source() policy.Source
	// Set makes objs the complete set of objects, creating, updating and
	// deleting as needed. It returns once the backend was told; the
	// source may publish the change a little later.
	Set(t *testing.T, objs ...runtime.Object)
}

// Factory starts a backend holding the initial objects; it must stop it
// when the test ends.
type Factory func(t *testing.T, initial ...runtime.Object) Harness

// Namespace and identities used by the suite.
const (
	NS        = "my-app"
	GatewayID = "api-gateway.my-app.serviceaccount.identity.weft.cluster.local"
	ReportsID = "reports.my-app.serviceaccount.identity.weft.cluster.local"
)

// Objects of the seed example, as pods (which a cluster has) rather than
// Deployments.

// Namespace returns the meshed namespace, with extra annotations.
func Namespace(annotations map[string]string) *corev1.Namespace {
	a := map[string]string{"linkerd.io/inject": "enabled"}
	for k, v := range annotations {
		a[k] = v
	}
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: NS, Annotations: a}}
}

// WebPod is a pod of the web workload with a port named http (8080) and
// a readiness probe on /ready.
func WebPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: NS, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{
			Name: "web", Image: "example/web",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "admin", ContainerPort: 9990}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/ready", Port: intstr.FromString("http")}}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.42.0.10", PodIPs: []corev1.PodIP{{IP: "10.42.0.10"}}},
	}
}

// ServiceAccount returns a service account in NS.
func ServiceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: NS}}
}

// Server is web-http: HTTP/1 on port http of app=web, access policy deny.
func Server() *v1beta3.Server {
	return &v1beta3.Server{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta3", Kind: "Server"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-http", Namespace: NS},
		Spec: v1beta3.ServerSpec{
			PodSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Port:          intstr.FromString("http"),
			ProxyProtocol: v1beta3.ProxyProtocolHTTP1,
			AccessPolicy:  v1beta3.AccessPolicyDeny,
		},
	}
}

// AuthorizationPolicy is web-api-gateway: Server web-http for the
// api-gateway service account.
func AuthorizationPolicy() *v1alpha1.AuthorizationPolicy {
	return &v1alpha1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-api-gateway", Namespace: NS},
		Spec: v1alpha1.AuthorizationPolicySpec{
			TargetRef:                  v1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"},
			RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{{Kind: "ServiceAccount", Name: "api-gateway"}},
		},
	}
}

// MeshTLSPolicy is an AuthorizationPolicy web-reports requiring the
// MeshTLSAuthentication reports-authn.
func MeshTLSPolicy() (*v1alpha1.AuthorizationPolicy, *v1alpha1.MeshTLSAuthentication) {
	ap := &v1alpha1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-reports", Namespace: NS},
		Spec: v1alpha1.AuthorizationPolicySpec{
			TargetRef: v1alpha1.TargetRef{Group: "policy.linkerd.io", Kind: "Server", Name: "web-http"},
			RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{{
				Group: "policy.linkerd.io", Kind: "MeshTLSAuthentication", Name: "reports-authn"}},
		},
	}
	m := &v1alpha1.MeshTLSAuthentication{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "MeshTLSAuthentication"},
		ObjectMeta: metav1.ObjectMeta{Name: "reports-authn", Namespace: NS},
		Spec:       v1alpha1.MeshTLSAuthenticationSpec{Identities: []string{ReportsID}},
	}
	return ap, m
}

// ServerAuthorization is the legacy web-authz-legacy for api-gateway.
func ServerAuthorization() *v1beta1.ServerAuthorization {
	return &v1beta1.ServerAuthorization{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1beta1", Kind: "ServerAuthorization"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-authz-legacy", Namespace: NS},
		Spec: v1beta1.ServerAuthorizationSpec{
			Server: v1beta1.ServerRef{Name: "web-http"},
			Client: v1beta1.Client{MeshTLS: &v1beta1.MeshTLS{ServiceAccounts: []v1beta1.ServiceAccountRef{{Name: "api-gateway", Namespace: NS}}}},
		},
	}
}

// AdminRoute is a Gateway API HTTPRoute on web-http matching /admin, with
// an AuthorizationPolicy that admits api-gateway on it.
func AdminRoute() (*gatewayv1.HTTPRoute, *v1alpha1.AuthorizationPolicy) {
	group := gatewayv1.Group("policy.linkerd.io")
	kind := gatewayv1.Kind("Server")
	exact := gatewayv1.PathMatchPathPrefix
	value := "/admin"
	r := &gatewayv1.HTTPRoute{
		TypeMeta:   metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-admin", Namespace: NS},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &group, Kind: &kind, Name: "web-http"}}},
			Rules:           []gatewayv1.HTTPRouteRule{{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &exact, Value: &value}}}}},
		},
	}
	ap := &v1alpha1.AuthorizationPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.linkerd.io/v1alpha1", Kind: "AuthorizationPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-admin-gateway", Namespace: NS},
		Spec: v1alpha1.AuthorizationPolicySpec{
			TargetRef:                  v1alpha1.TargetRef{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute", Name: "web-admin"},
			RequiredAuthenticationRefs: []v1alpha1.NamespacedTargetRef{{Kind: "ServiceAccount", Name: "api-gateway"}},
		},
	}
	return r, ap
}

// Base returns the objects every test starts from, without policies.
func Base() []runtime.Object {
	return []runtime.Object{Namespace(nil), WebPod(), ServiceAccount("web"), ServiceAccount("api-gateway"), ServiceAccount("reports"), Server()}
}

func with(objs []runtime.Object, more ...runtime.Object) []runtime.Object {
	return append(append([]runtime.Object(nil), objs...), more...)
}

var web = policy.WorkloadRef{Namespace: NS, Kind: "pod", Name: "web-0"}

// running starts an indexer on the source for the duration of the test.
func running(t *testing.T, src policy.Source) *policy.Indexer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return x
}

func decide(x *policy.Indexer, identity string, req *authz.Request) authz.Decision {
	cl := policy.Client{Identity: identity}
	if identity == "" {
		cl = policy.Client{Unauthenticated: true}
	}
	res, err := x.Index().Evaluate(policy.Request{Workload: web, Port: intstr.FromString("http"), Client: cl, HTTP: req})
	if err != nil {
		return authz.Deny
	}
	return res.Decision
}

func eventuallyDecides(t *testing.T, x *policy.Indexer, identity string, req *authz.Request, want authz.Decision, msg string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() bool { return decide(x, identity, req) == want }, msg)
}

// Run runs the suite against the backend newHarness starts.
func Run(t *testing.T, newHarness Factory) {
	t.Run("SeedAuthorizationPolicyAllowsOnlyTheGateway", func(t *testing.T) {
		h := newHarness(t, with(Base(), AuthorizationPolicy())...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, GatewayID, nil, authz.Allow, "api-gateway allowed")
		assert.Equal(t, authz.Deny, decide(x, ReportsID, nil))
		assert.Equal(t, authz.Deny, decide(x, "", nil))
		assert.Equal(t, authz.Allow, decide(x, GatewayID, &authz.Request{Method: "GET", Path: "/items"}))
		assert.Equal(t, authz.Allow, decide(x, "", &authz.Request{Method: "GET", Path: "/ready"}), "kubelet probe")
	})

	t.Run("SeedServerAuthorizationAllowsOnlyTheGateway", func(t *testing.T) {
		h := newHarness(t, with(Base(), ServerAuthorization())...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, GatewayID, nil, authz.Allow, "api-gateway allowed")
		assert.Equal(t, authz.Deny, decide(x, ReportsID, nil))
		assert.Equal(t, authz.Deny, decide(x, "", nil))
	})

	t.Run("DeletingTheAuthorizationPolicyRevokesAccess", func(t *testing.T) {
		h := newHarness(t, with(Base(), AuthorizationPolicy())...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, GatewayID, nil, authz.Allow, "api-gateway allowed")
		h.Set(t, Base()...)
		eventuallyDecides(t, x, GatewayID, nil, authz.Deny, "api-gateway denied after the policy is deleted")
	})

	t.Run("DeletingAReferencedMeshTLSAuthenticationRevokesAccess", func(t *testing.T) {
		ap, m := MeshTLSPolicy()
		h := newHarness(t, with(Base(), ap, m)...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, ReportsID, nil, authz.Allow, "reports allowed")
		h.Set(t, with(Base(), ap)...)
		eventuallyDecides(t, x, ReportsID, nil, authz.Deny, "reports denied once its MeshTLSAuthentication is gone")
		h.Set(t, with(Base(), ap, m)...)
		eventuallyDecides(t, x, ReportsID, nil, authz.Allow, "reports allowed again when it comes back")
	})

	t.Run("DeletingTheServerFallsBackToTheDefaultPolicy", func(t *testing.T) {
		h := newHarness(t, with(Base(), AuthorizationPolicy())...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, ReportsID, nil, authz.Deny, "reports denied by the Server")
		objs := []runtime.Object{Namespace(nil), WebPod(), ServiceAccount("web"), AuthorizationPolicy()}
		h.Set(t, objs...)
		eventuallyDecides(t, x, ReportsID, nil, authz.Allow, "reports allowed by all-unauthenticated once the Server is gone")
	})

	t.Run("NamespaceDefaultPolicyAnnotationApplies", func(t *testing.T) {
		objs := []runtime.Object{Namespace(map[string]string{vocab.AnnotationDefaultInboundPolicy: "deny"}), WebPod()}
		h := newHarness(t, objs...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, GatewayID, nil, authz.Deny, "deny by namespace default")
		h.Set(t, Namespace(map[string]string{vocab.AnnotationDefaultInboundPolicy: "all-authenticated"}), WebPod())
		eventuallyDecides(t, x, GatewayID, nil, authz.Allow, "all-authenticated admits meshed clients")
		assert.Equal(t, authz.Deny, decide(x, "", nil))
	})

	t.Run("RouteAuthorizationAppliesOnlyToItsRoute", func(t *testing.T) {
		r, ap := AdminRoute()
		h := newHarness(t, with(Base(), r, ap)...)
		x := running(t, h.Source())
		admin := &authz.Request{Method: "GET", Path: "/admin/users"}
		eventuallyDecides(t, x, GatewayID, admin, authz.Allow, "gateway reaches /admin")
		assert.Equal(t, authz.Deny, decide(x, ReportsID, admin))
		res, err := x.Index().Evaluate(policy.Request{Workload: web, Port: intstr.FromString("http"),
			Client: policy.Client{Identity: GatewayID}, HTTP: &authz.Request{Method: "GET", Path: "/other"}})
		require.NoError(t, err)
		assert.Equal(t, authz.ReasonNoRoute, res.Reason, "with routes attached, other paths match no route")
		res, err = x.Index().Evaluate(policy.Request{Workload: web, Port: intstr.FromString("http"),
			Client: policy.Client{Identity: GatewayID}, HTTP: &authz.Request{Method: "GET", Path: "/public/../admin"}})
		require.NoError(t, err)
		assert.Equal(t, authz.Allow, res.Decision)
		assert.Equal(t, "/admin", res.Path)
	})

	runLinkerdParity(t, newHarness)
	runLinkerdRateLimit(t, newHarness)
	runLinkerdEgress(t, newHarness)
	runLinkerdStreamRoutes(t, newHarness)

	t.Run("InboundWatchPortStreamsTheSnapshotThenChanges", func(t *testing.T) {
		h := newHarness(t, with(Base(), AuthorizationPolicy())...)
		x := running(t, h.Source())
		eventuallyDecides(t, x, GatewayID, nil, authz.Allow, "first snapshot indexed")
		client := serve(t, x)
		ctx := testutil.Context(t, 10*time.Second)

		got, err := client.GetPort(ctx, &inbound.PortSpec{Workload: NS + ":web-0", Port: 8080})
		require.NoError(t, err)
		assert.Equal(t, "web-http", got.Labels["name"])

		stream, err := client.WatchPort(ctx, &inbound.PortSpec{Workload: NS + ":web-0", Port: 8080})
		require.NoError(t, err)
		first, err := stream.Recv()
		require.NoError(t, err)
		require.Len(t, first.Authorizations, 1)
		assert.Equal(t, "web-api-gateway", first.Authorizations[0].GetMetadata().GetResource().GetName())

		h.Set(t, Base()...)
		next, err := stream.Recv()
		require.NoError(t, err)
		assert.Empty(t, next.Authorizations, "the deleted policy must leave the server with no authorization")
		srv, err := authz.FromProto(next)
		require.NoError(t, err)
		assert.Equal(t, authz.Deny, authz.Evaluate(srv, authz.Conn{IP: testIP, TLS: true, Identity: GatewayID}, nil).Decision)
	})
}

var testIP = netip.MustParseAddr("10.42.0.20")

func serve(t *testing.T, x *policy.Indexer) inbound.InboundServerPoliciesClient {
	t.Helper()
	is, err := policy.NewInboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	is.Register(gs)
	l := testutil.Listen(t)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return inbound.NewInboundServerPoliciesClient(conn)
}
