//go:build clusterintegration

package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/mesh/install"
)

var (
	grpcRouteGVR   = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "grpcroutes"}
	policyRouteGVR = schema.GroupVersionResource{Group: "policy.linkerd.io", Version: "v1beta3", Resource: "httproutes"}
)

// routePolicyLive is Linkerd's restricting-access tutorial at the route
// level, on the demo application of step 3d, with the Gateway API arriving
// after the install, as it does on a cluster that adds it later:
//
//   - `weft install --crds --gateway-api` gives the Gateway API CRDs the
//     policy controller has been running without since step 1;
//   - a Server for api's gRPC port, a GRPCRoute for the test service on
//     it, and an AuthorizationPolicy on the route admitting web's identity
//     only take effect without restarting anything: web's calls go on,
//     an intruder's (another ServiceAccount, injected the same way) get
//     PermissionDenied;
//   - the routes carry the status Linkerd's controller writes: the
//     GRPCRoute Accepted, a policy.linkerd.io HTTPRoute on the same
//     Server not accepted, with the reason (a Server with GRPCRoutes takes
//     no HTTPRoutes: RouteReasonConflicted, as Linkerd's);
//   - `weft diagnostics policy` shows what api's proxy receives for the
//     port: the GRPCRoute and web's identity.
//
// Everything it adds is deleted at its end, the Gateway API CRDs too.
func (m *mesh) routePolicyLive(t *testing.T) {
	e := m.e
	ns := m.demoNS
	require.NotEmpty(t, ns, "step 3d deployed the demo application")
	before := m.policyControllerPods(t)

	// The Gateway API CRDs, now.
	m.installGatewayCRDs(t)

	// An intruder: the web frontend's image under another ServiceAccount.
	manifest := fmt.Sprintf(intruderManifest, ns, ns, e.images["testapp"].Ref)
	code, injected, errs := e.weftCmd(t, []byte(manifest), "inject", "-")
	require.Equal(t, 0, code, errs)
	e.applyManifest(t, injected)
	eventually(t, 3*time.Minute, "deployment "+ns+"/intruder rolled out", func(ctx context.Context) error {
		return e.rolledOut(ctx, ns, "intruder")
	})
	web, intruder := e.onePod(t, ns, "web"), e.onePod(t, ns, "intruder")

	objects := routePolicy(t, ns)
	t.Cleanup(func() { m.deleteObjects(t, ns, objects) })
	ctx := timeout(t, time.Minute)
	for _, p := range objects {
		_, err := e.dyn.Resource(p.gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: p.obj}, metav1.CreateOptions{FieldValidation: "Strict"})
		require.NoError(t, err, "create %s", p.obj["kind"])
	}
	applied := time.Now()

	// In force: web admitted on the route (its calls succeed but for
	// api's deliberate failures), the intruder denied.
	eventually(t, 2*time.Minute, "web admitted and the intruder denied on the GRPCRoute", func(context.Context) error {
		if c := e.call(t, intruder, "http://127.0.0.1:8080/unary", "route", 2); c.Codes["502"] != 2 || !anyContains(c.Errors, "PermissionDenied") {
			return fmt.Errorf("intruder -> api: %+v", c)
		}
		c := e.call(t, web, "http://127.0.0.1:8080/empty", "route", 4)
		if c.OK != 4 {
			return fmt.Errorf("web -> api EmptyCall: %+v", c)
		}
		return nil
	})
	t.Logf("the route-scoped policy was in force %s after it was applied", time.Since(applied).Round(100*time.Millisecond))
	c := e.call(t, web, "http://127.0.0.1:8080/unary", "route", 20)
	assert.False(t, anyContains(c.Errors, "PermissionDenied"), "web's calls are admitted: %+v", c)
	assert.Positive(t, c.OK, "web's calls succeed: %+v", c)

	// Route status, as `kubectl get -o yaml` shows it.
	eventually(t, time.Minute, "status of GRPCRoute api-test-service: Accepted", func(ctx context.Context) error {
		return routeCondition(ctx, e, grpcRouteGVR, ns, "api-test-service", "api-grpc", "Accepted", "True", "Accepted")
	})
	eventually(t, time.Minute, "status of HTTPRoute api-http: not accepted beside the Server's GRPCRoute", func(ctx context.Context) error {
		return routeCondition(ctx, e, policyRouteGVR, ns, "api-http", "api-grpc", "Accepted", "False", "RouteReasonConflicted")
	})

	// diagnostics policy: what api's proxy receives for its gRPC port.
	api := e.onePod(t, ns, "api")
	code, diag, errs := e.weftCmd(t, nil, "diagnostics", "policy", "-n", ns, "po/"+api.Name, "8090", "-o", "json")
	require.Equal(t, 0, code, errs)
	for _, want := range []string{`"GRPCRoute"`, `"api-test-service"`, identityOf("web", ns)} {
		assert.Contains(t, string(diag), want, "weft diagnostics policy po/%s 8090", api.Name)
	}
	assert.NotContains(t, string(diag), identityOf("intruder", ns))

	// And what a client receives for api's Service port.
	code, diag, errs = e.weftCmd(t, nil, "diagnostics", "policy", "-n", ns, "svc/api", "8090", "-o", "json")
	require.Equal(t, 0, code, errs)
	var outbound struct {
		Metadata struct {
			Resource struct{ Kind, Name, Namespace string }
		}
	}
	require.NoError(t, json.Unmarshal(diag, &outbound), "%s", diag)
	assert.Equal(t, "Service", outbound.Metadata.Resource.Kind, "%s", diag)
	assert.Equal(t, "api", outbound.Metadata.Resource.Name, "%s", diag)
	assert.Equal(t, ns, outbound.Metadata.Resource.Namespace, "%s", diag)

	// Nothing was restarted for any of it.
	assert.Equal(t, before, m.policyControllerPods(t), "the policy controller's pods, with their restart counts")
}

// anyContains reports whether one of list contains s.
func anyContains(list []string, s string) bool {
	for _, v := range list {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// policyControllerPods names the policy controller's pods with their
// containers' restart counts.
func (m *mesh) policyControllerPods(t *testing.T) map[string]int32 {
	t.Helper()
	pods, err := m.e.kube.CoreV1().Pods(cpNS).List(timeout(t, time.Minute), metav1.ListOptions{LabelSelector: install.LabelComponent + "=policy"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items, "policy controller pods")
	out := map[string]int32{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Name+"/"+cs.Name] = cs.RestartCount
		}
	}
	return out
}

// routeCondition checks the condition typ of the route's status entry
// for parent Server parent, written by Linkerd's controller name.
func routeCondition(ctx context.Context, e *env, gvr schema.GroupVersionResource, ns, name, parent, typ, status, reason string) error {
	u, err := e.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
	for _, p := range parents {
		pm, _ := p.(map[string]any)
		ctl, _, _ := unstructured.NestedString(pm, "controllerName")
		ref, _, _ := unstructured.NestedString(pm, "parentRef", "name")
		if ctl != "linkerd.io/policy-controller" || ref != parent {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(pm, "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == typ {
				if cm["status"] != status || cm["reason"] != reason {
					return fmt.Errorf("condition %s: status %v reason %v (%v), want %s %s", typ, cm["status"], cm["reason"], cm["message"], status, reason)
				}
				return nil
			}
		}
		return fmt.Errorf("no %s condition in %v", typ, conds)
	}
	return fmt.Errorf("no status entry of linkerd.io/policy-controller for parent %s: %v", parent, parents)
}

// routePolicy is the route-level policy of step 3e, as a Linkerd user
// writes it for the demo's api: docs/policy.md's walkthrough policy.
func routePolicy(t *testing.T, ns string) []policyObject {
	t.Helper()
	gvrs := map[string]schema.GroupVersionResource{
		"policy.linkerd.io/Server":                serverGVR,
		"gateway.networking.k8s.io/GRPCRoute":     grpcRouteGVR,
		"policy.linkerd.io/HTTPRoute":             policyRouteGVR,
		"policy.linkerd.io/MeshTLSAuthentication": meshTLSGVR,
		"policy.linkerd.io/AuthorizationPolicy":   authzGVR,
	}
	var out []policyObject
	for _, u := range walkthroughPolicy(t, ns) {
		gvk := u.GroupVersionKind()
		gvr, ok := gvrs[gvk.Group+"/"+gvk.Kind]
		require.True(t, ok, "docs/policy.md walkthrough: a %s the step does not expect", gvk)
		require.Equal(t, gvr.Version, gvk.Version, "docs/policy.md walkthrough: %s", gvk)
		out = append(out, policyObject{gvr, u.Object})
	}
	return out
}

// deleteObjects deletes objects of ns and waits until they are gone.
// installGatewayCRDs applies the Gateway API CRDs `weft install --crds
// --gateway-api` prints and deletes them when the test ends.
func (m *mesh) installGatewayCRDs(t *testing.T) {
	t.Helper()
	e := m.e
	code, out, errs := e.weftCmd(t, nil, "install", "--crds", "--gateway-api")
	require.Equal(t, 0, code, errs)
	objs, err := install.Decode(out)
	require.NoError(t, err)
	var gw []runtime.Object
	var gwObjs []install.Object
	for _, o := range objs {
		if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok && crd.Spec.Group == "gateway.networking.k8s.io" {
			gw = append(gw, o)
			gwObjs = append(gwObjs, o)
		}
	}
	require.Len(t, gw, 4, "weft install --crds --gateway-api prints the HTTPRoute, GRPCRoute, TCPRoute and TLSRoute CRDs")
	t.Cleanup(func() { m.deleteGatewayCRDs(t, gwObjs) })
	e.applyObjects(t, gw)
	e.waitCRDsEstablished(t, gwObjs)
}

func (m *mesh) deleteObjects(t *testing.T, ns string, objects []policyObject) {
	t.Helper()
	ctx := timeout(t, time.Minute)
	for i := len(objects) - 1; i >= 0; i-- {
		p := objects[i]
		name := p.obj["metadata"].(map[string]any)["name"].(string)
		err := m.e.dyn.Resource(p.gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			assert.NoError(t, err, "delete %s %s", p.obj["kind"], name)
		}
	}
	for _, p := range objects {
		name := p.obj["metadata"].(map[string]any)["name"].(string)
		eventually(t, 30*time.Second, name+" deleted", func(ctx context.Context) error {
			_, err := m.e.dyn.Resource(p.gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err == nil:
				return errors.New("still there")
			case strings.Contains(err.Error(), "the server could not find the requested resource"):
				return nil // its CRD is gone already
			}
			return err
		})
	}
}

// deleteGatewayCRDs deletes the Gateway API CRDs the step installed, and
// waits until they are gone.
func (m *mesh) deleteGatewayCRDs(t *testing.T, crds []install.Object) {
	t.Helper()
	ctx := timeout(t, 2*time.Minute)
	api := m.e.apiext.ApiextensionsV1().CustomResourceDefinitions()
	for _, o := range crds {
		err := api.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			assert.NoError(t, err, "delete CRD %s", o.GetName())
		}
	}
	for _, o := range crds {
		eventually(t, time.Minute, "CRD "+o.GetName()+" deleted", func(ctx context.Context) error {
			_, err := api.Get(ctx, o.GetName(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return errors.New("still there")
			}
			return err
		})
	}
}

// intruderManifest is the web frontend's Deployment under another
// ServiceAccount (namespace, namespace, image).
const intruderManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: intruder, namespace: %s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: intruder, namespace: %s, labels: {app: intruder}}
spec:
  replicas: 1
  selector: {matchLabels: {app: intruder}}
  template:
    metadata: {labels: {app: intruder}}
    spec:
      serviceAccountName: intruder
      containers:
        - name: app
          image: %s
          imagePullPolicy: Never
          args: [--name, intruder, --tcp, "", --grpc-upstream, "api:8090"]
          ports:
            - {name: http, containerPort: 8080}
            - {name: control, containerPort: 8081}
          readinessProbe:
            httpGet: {path: /healthz, port: 8081}
            periodSeconds: 1
          securityContext:
            runAsNonRoot: true
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
`
