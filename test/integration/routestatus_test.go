//go:build kubeintegration

package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/policy"
	policykube "github.com/weftmesh/weft/mesh/policy/kubernetes"
)

// statusBound is how long a route's status may take to appear: a watch
// event, an index rebuild and one write (the same order as watchBound).
const statusBound = 20 * time.Second

// routeCondition reads, from a route on the API server, the condition of
// type typ in the status.parents entry Weft owns for the parent kind/name:
// "True/Accepted", or "" while there is none.
func routeCondition(ctx context.Context, c clients, gvr schema.GroupVersionResource, ns, name, parentKind, parentName, typ string) (string, error) {
	u, err := c.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		if ctrl, _, _ := unstructured.NestedString(pm, "controllerName"); ctrl != policy.ControllerName {
			continue
		}
		k, _, _ := unstructured.NestedString(pm, "parentRef", "kind")
		n, _, _ := unstructured.NestedString(pm, "parentRef", "name")
		if k != parentKind || n != parentName {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		for _, cd := range conds {
			cm, _ := cd.(map[string]any)
			if t, _, _ := unstructured.NestedString(cm, "type"); t == typ {
				st, _, _ := unstructured.NestedString(cm, "status")
				r, _, _ := unstructured.NestedString(cm, "reason")
				return st + "/" + r, nil
			}
		}
	}
	return "", nil
}

// waitCondition polls the route until its condition reads want, and fails
// t after statusBound.
func waitCondition(t *testing.T, c clients, gvr schema.GroupVersionResource, ns, name, parentKind, parentName, typ, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statusBound)
	defer cancel()
	var got string
	var err error
	for {
		got, err = routeCondition(ctx, c, gvr, ns, name, parentKind, parentName, typ)
		if err == nil && got == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s/%s: %s of %s/%s is %q (err %v), want %q within %s", gvr.Resource, ns, name, typ, parentKind, parentName, got, err, want, statusBound)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func applyYAML(t *testing.T, c clients, gvr schema.GroupVersionResource, ns, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	_, err := c.dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldValidation: "Strict"})
	require.NoError(t, err, "create %s", u.GetName())
}

// statusWriter runs a source, an index and a status writer holding the
// lease as identity, as `weft-controller policy` runs them; stop ends
// them and waits.
type statusWriter struct {
	passes, writes atomic.Int64
	stop           func()
}

func startStatusWriter(t *testing.T, c clients, leaseNS, identity string) *statusWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	src, err := policykube.New(ctx, c.kube, c.dyn, policykube.WithDebounce(10*time.Millisecond))
	require.NoError(t, err)
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	sw := &statusWriter{}
	w, err := policykube.NewStatusWriter(c.dyn, x,
		policykube.WithStatusLease(c.kube, leaseNS, identity),
		policykube.WithStatusLeaseDuration(3*time.Second),
		policykube.WithStatusResync(100*time.Millisecond),
		policykube.WithStatusPassHook(func(writes, _ int) {
			sw.passes.Add(1)
			sw.writes.Add(int64(writes))
		}))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = x.Run(ctx) }()
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	var once sync.Once
	sw.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			_ = src.Close()
		})
	}
	t.Cleanup(sw.stop)
	return sw
}

func leaseHolder(t *testing.T, c clients, ns string) string {
	t.Helper()
	l, err := c.kube.CoordinationV1().Leases(ns).Get(context.Background(), policykube.StatusLeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestPolicyControllerWritesRouteStatusAsLinkerdDoes is issue 29 item 4:
// routes that attach say Accepted, and routes that do not say why, in
// status.parents where `kubectl get -o yaml` shows them: an HTTPRoute on
// a gRPC Server, a parentRef to a missing Server, a backendRef to a
// missing Service. Two replicas run; only the Lease holder writes, it
// writes nothing once the statuses are right, another controller's entry
// stays, and when the holder stops the other replica takes over.
func TestPolicyControllerWritesRouteStatusAsLinkerdDoes(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 3*time.Minute)
	ns := newNamespace(t, c, "routestatus", nil, nil)
	leaseNS := newNamespace(t, c, "routestatus-cp", nil, nil)

	_, err := c.kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1", Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 8080}, {Name: "grpc", ContainerPort: 9090},
		}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, s := range []string{
		"apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: web-http}\nspec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: HTTP/1}\n",
		"apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata: {name: web-grpc}\nspec: {podSelector: {matchLabels: {app: web}}, port: grpc, proxyProtocol: gRPC}\n",
	} {
		applyYAML(t, c, policykube.ServersResource, ns, s)
	}

	policyRoute := func(name, server string) string {
		return fmt.Sprintf("apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: %s}\nspec:\n  parentRefs: [{group: policy.linkerd.io, kind: Server, name: %s}]\n  rules: [{matches: [{path: {type: PathPrefix, value: /}}]}]\n", name, server)
	}
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, policyRoute("attached", "web-http"))
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, policyRoute("on-grpc", "web-grpc"))
	applyYAML(t, c, policykube.GatewayHTTPRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: no-server}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: nope}]
`)
	applyYAML(t, c, policykube.GatewayHTTPRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: no-backend}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: missing, port: 80}]}]
`)
	applyYAML(t, c, policykube.GRPCRoutesResource, ns, `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc}
spec:
  parentRefs: [{group: core, kind: Service, name: web}, {name: edge}]
`)
	// Another controller (a gateway's) has already written its entry.
	u, err := c.dyn.Resource(policykube.GRPCRoutesResource).Namespace(ns).Get(ctx, "grpc", metav1.GetOptions{})
	require.NoError(t, err)
	foreign := map[string]any{
		"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
		"controllerName": "example.com/gateway-controller",
		"conditions": []any{map[string]any{
			"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
		}},
	}
	require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{foreign}, "status", "parents"))
	_, err = c.dyn.Resource(policykube.GRPCRoutesResource).Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	require.NoError(t, err)

	a := startStatusWriter(t, c, leaseNS, "replica-a")
	b := startStatusWriter(t, c, leaseNS, "replica-b")

	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "attached", "Server", "web-http", "Accepted", "True/Accepted")
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "on-grpc", "Server", "web-grpc", "Accepted", "False/NotAllowedByListeners")
	waitCondition(t, c, policykube.GatewayHTTPRoutesResource, ns, "no-server", "Server", "nope", "Accepted", "False/NoMatchingParent")
	waitCondition(t, c, policykube.GatewayHTTPRoutesResource, ns, "no-backend", "Service", "web", "Accepted", "True/Accepted")
	waitCondition(t, c, policykube.GatewayHTTPRoutesResource, ns, "no-backend", "Service", "web", "ResolvedRefs", "False/BackendNotFound")
	waitCondition(t, c, policykube.GRPCRoutesResource, ns, "grpc", "Service", "web", "Accepted", "True/Accepted")

	// (A GRPCRoute on web-grpc would make the HTTPRoute there conflicted,
	// which is checked first; this one is outbound.) The gateway's entry
	// is still there, first and unchanged.
	u, err = c.dyn.Resource(policykube.GRPCRoutesResource).Namespace(ns).Get(ctx, "grpc", metav1.GetOptions{})
	require.NoError(t, err)
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	require.Len(t, parents, 2)
	assert.Equal(t, foreign, parents[0])

	// One replica holds the Lease and makes every pass; the other makes none.
	holder := leaseHolder(t, c, leaseNS)
	require.Contains(t, []string{"replica-a", "replica-b"}, holder)
	leader, standby := a, b
	if holder == "replica-b" {
		leader, standby = b, a
	}
	assert.Zero(t, standby.passes.Load(), "the replica without the Lease writes nothing")

	// Statuses are right: further passes (every 100ms, and after index
	// rebuilds) write nothing.
	writes, passes := leader.writes.Load(), leader.passes.Load()
	deadline := time.Now().Add(statusBound)
	for leader.passes.Load() < passes+5 {
		require.True(t, time.Now().Before(deadline), "the leader made no passes")
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, writes, leader.writes.Load(), "no writes once every status is right")

	// Fix the route on the gRPC Server by pointing it at the HTTP one: its
	// status follows the change.
	r, err := c.dyn.Resource(policykube.HTTPRoutesResource).Namespace(ns).Get(ctx, "on-grpc", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedSlice(r.Object, []any{map[string]any{"group": "policy.linkerd.io", "kind": "Server", "name": "web-http"}}, "spec", "parentRefs"))
	_, err = c.dyn.Resource(policykube.HTTPRoutesResource).Namespace(ns).Update(ctx, r, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "on-grpc", "Server", "web-http", "Accepted", "True/Accepted")
	got, err := routeCondition(ctx, c, policykube.HTTPRoutesResource, ns, "on-grpc", "Server", "web-grpc", "Accepted")
	require.NoError(t, err)
	assert.Empty(t, got, "the entry for the parent the route no longer names is gone")

	// The holder stops (releasing the Lease); the other replica takes over
	// and writes the status of a route created after.
	leader.stop()
	applyYAML(t, c, policykube.HTTPRoutesResource, ns, policyRoute("later", "web-http"))
	waitCondition(t, c, policykube.HTTPRoutesResource, ns, "later", "Server", "web-http", "Accepted", "True/Accepted")
	assert.True(t, strings.HasPrefix(leaseHolder(t, c, leaseNS), "replica-") && leaseHolder(t, c, leaseNS) != holder, "the other replica holds the Lease")
	assert.NotZero(t, standby.passes.Load())
}
