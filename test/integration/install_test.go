//go:build kubeintegration

package integration_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/restmapper"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
)

// installCLI runs a weft command and returns its status and output.
func installCLI(t *testing.T, cmd cli.Command, args ...string) (int, []byte, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st := cmd.Run(timeout(t, 2*time.Minute), args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return st, out.Bytes(), errb.String()
}

// installCheck runs `weft check -o json --wait 0` with args and decodes the
// report: no kubelet runs here, so the pods never become ready and waiting
// for them would only delay the failure the tests expect.
func installCheck(t *testing.T, args ...string) (int, check.Report) {
	t.Helper()
	st, out, errs := installCLI(t, cli.CheckCommand(), append([]string{"--kubeconfig", env.KubeconfigPath(), "-o", "json", "--wait", "0"}, args...)...)
	var rep check.Report
	require.NoError(t, json.Unmarshal(out, &rep), "weft check output: %s\nstderr: %s", out, errs)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	t.Logf("weft check %s:\n%s", strings.Join(args, " "), text.String())
	return st, rep
}

func installResult(t *testing.T, r check.Report, category, name string) check.Result {
	t.Helper()
	res, ok := r.Find(category, name)
	require.True(t, ok, "no %s / %q result", category, name)
	return res
}

// installApply creates obj through the dynamic client, with strict field
// validation, for real or as a server-side dry run.
func installApply(ctx context.Context, t *testing.T, c clients, mapper *restmapper.DeferredDiscoveryRESTMapper, obj install.Object, dryRun bool) error {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: m}
	ri, err := resourceFor(mapper, u, c.dyn)
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldValidation: "Strict", FieldManager: "weft-install-test"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(ctx, u, opts)
	return err
}

// TestInstallAppliesToARealAPIServerAndCheckReportsWhatItSees renders the
// install with `weft install`, applies it to the real API server (CRDs
// first, then the rest; server-side dry runs for the HA variant), checks
// the RBAC it grants through SubjectAccessReviews, and runs `weft check
// --pre` and `weft check` against the result. No kubelet or controller
// manager runs here, so check must report the control plane as not ready,
// saying exactly why.
func TestInstallAppliesToARealAPIServerAndCheckReportsWhatItSees(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	ctx := timeout(t, 5*time.Minute)
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	ns := "weft-install-" + hex.EncodeToString(suffix)

	// Before: the cluster is ready for an install in ns.
	st, pre := installCheck(t, "--pre", "--namespace", ns)
	assert.Equal(t, cli.ExitOK, st)
	assert.True(t, pre.Success)
	assert.Zero(t, pre.Count(check.StatusFail)+pre.Count(check.StatusWarn))
	assert.Equal(t, "9 present and compatible, 0 to be installed", installResult(t, pre, check.CategoryPreInstall, "existing CRDs are compatible").Message)
	assert.Equal(t, "allowed to create all 14 kinds", installResult(t, pre, check.CategoryPreInstall, "you may create the control plane's resources").Message)

	// Render, keeping the generated certificates; rendering again from them
	// gives identical bytes.
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	testutil.WriteFile(t, values, []byte("controlPlaneNamespace: "+ns+"\n"))
	st, manifest, errs := installCLI(t, cli.InstallCommand(), "--values", values, "--certs-out", filepath.Join(dir, "certs"))
	require.Equal(t, cli.ExitOK, st, errs)
	given := []string{"--values", values,
		"--identity-trust-anchors-file", filepath.Join(dir, "certs", "ca.crt"),
		"--identity-issuer-dir", filepath.Join(dir, "certs", "issuer"),
		"--webhook-cert-dir", filepath.Join(dir, "certs", "webhook"),
		"--tap-cert-dir", filepath.Join(dir, "certs", "tap")}
	st, again, errs := installCLI(t, cli.InstallCommand(), given...)
	require.Equal(t, cli.ExitOK, st, errs)
	require.True(t, bytes.Equal(manifest, again), "weft install is not deterministic given the same certificates")
	st, haManifest, errs := installCLI(t, cli.InstallCommand(), append([]string{"--ha"}, given...)...)
	require.Equal(t, cli.ExitOK, st, errs)

	objs, err := install.Decode(manifest)
	require.NoError(t, err)
	haObjs, err := install.Decode(haManifest)
	require.NoError(t, err)

	// CRDs first, server-side applied over the package's copies, and
	// Established.
	var rest []install.Object
	for _, o := range objs {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			rest = append(rest, o)
			continue
		}
		body, err := json.Marshal(crd)
		require.NoError(t, err)
		force := true
		_, err = c.apiext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "weft-install-test", Force: &force, FieldValidation: "Strict"})
		require.NoError(t, err, "apply CRD %s", crd.Name)
		require.NoError(t, waitEstablished(ctx, c, crd.Name))
	}

	mapper := newMapper(c)
	// The namespace for real (namespaced dry runs need it), then a
	// server-side dry run of every other object of both renderings.
	require.Equal(t, "Namespace", rest[0].GetObjectKind().GroupVersionKind().Kind)
	require.NoError(t, installApply(ctx, t, c, mapper, rest[0], false), "create namespace")
	dry := 0
	for _, set := range [][]install.Object{rest[1:], haObjs} {
		for _, o := range set {
			switch o.(type) {
			case *apiextv1.CustomResourceDefinition, *corev1.Namespace:
				continue
			}
			require.NoError(t, installApply(ctx, t, c, mapper, o, true), "dry-run %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
			dry++
		}
	}
	t.Logf("the API server accepted %d objects in server-side dry runs (default and HA)", dry)

	// Then everything for real; the cluster-scoped objects go away at the
	// end so that later tests see an API server without this install's
	// webhooks.
	for _, o := range rest[1:] {
		require.NoError(t, installApply(ctx, t, c, mapper, o, false), "create %s %s", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
		if o.GetNamespace() == "" {
			o := o
			t.Cleanup(func() { installDelete(t, c, mapper, o) })
		}
	}

	// RBAC grants each component what it uses and nothing beside.
	sar := func(sa string, attrs authorizationv1.ResourceAttributes) bool {
		t.Helper()
		r, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + sa,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &attrs,
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	for _, tc := range []struct {
		sa    string
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{"weft-identity", authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, true},
		{"weft-identity", authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ns}, false},
		{"weft-identity", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, false},
		{"weft-destination", authorizationv1.ResourceAttributes{Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
		{"weft-destination", authorizationv1.ResourceAttributes{Verb: "list", Group: "linkerd.io", Resource: "serviceprofiles"}, true},
		{"weft-destination", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, true},
		{"weft-destination", authorizationv1.ResourceAttributes{Verb: "update", Resource: "services"}, false},
		{"weft-destination", authorizationv1.ResourceAttributes{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"}, false},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "watch", Group: "policy.linkerd.io", Resource: "servers"}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "list", Group: "gateway.networking.k8s.io", Resource: "grpcroutes"}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "list", Resource: "serviceaccounts"}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "watch", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "grpcroutes.gateway.networking.k8s.io"}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "list", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "httproutes.gateway.networking.k8s.io"}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "list", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, false},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "get", Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "servers.policy.linkerd.io"}, false},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "patch", Group: "policy.linkerd.io", Resource: "servers", Subresource: "status"}, false},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "patch", Group: "policy.linkerd.io", Resource: "egressnetworks", Subresource: "status", Namespace: ns}, true},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "update", Group: "policy.linkerd.io", Resource: "egressnetworks", Namespace: ns}, false},
		{"weft-policy", authorizationv1.ResourceAttributes{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, false},
		{"weft-proxy-injector", authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces"}, true},
		{"weft-proxy-injector", authorizationv1.ResourceAttributes{Verb: "list", Resource: "pods"}, false},
		{"weft-proxy-injector", authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ns}, false},
	} {
		assert.Equal(t, tc.want, sar(tc.sa, tc.attrs), "%s %s %s/%s", tc.sa, tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource)
	}

	// A pod from the identity Deployment's template passes the namespace's
	// "restricted" Pod Security level; with no scheduler it stays Pending.
	var identity *appsv1.Deployment
	for _, o := range rest {
		if d, ok := o.(*appsv1.Deployment); ok && d.Name == "weft-identity" {
			identity = d
		}
	}
	require.NotNil(t, identity)
	pod := &corev1.Pod{ObjectMeta: *identity.Spec.Template.ObjectMeta.DeepCopy(), Spec: *identity.Spec.Template.Spec.DeepCopy()}
	pod.Name, pod.Namespace = "weft-identity-0", ns
	_, err = c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err, "the identity pod is refused (Pod Security restricted?)")

	// A meshed workload elsewhere: its pod is created although the injector
	// does not run (failurePolicy Ignore), and is not ready.
	app := newNamespace(t, c, "install-app", nil, nil)
	meshed := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{vocab.LabelControlPlaneNamespace: ns}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: vocab.ProxyContainerName, Image: "ghcr.io/weftmesh/weft-proxy:dev", RestartPolicy: ptrTo(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "app", Image: "example.com/app:1"}},
		},
	}
	_, err = c.kube.CoreV1().Pods(app).Create(ctx, meshed, metav1.CreateOptions{})
	require.NoError(t, err, "with failurePolicy Ignore an unreachable injector must not block pods")

	// After: weft check sees the install and says precisely what is wrong.
	st, after := installCheck(t, "--namespace", ns, "--proxy")
	assert.Equal(t, cli.ExitFailure, st)
	assert.False(t, after.Success)
	for _, res := range after.Results {
		if res.Category == check.CategoryCRDs || res.Category == check.CategoryAPI || res.Category == check.CategoryIdentity {
			assert.Equal(t, check.StatusOK, res.Status, "%s: %s", res.Name, res.Message)
		}
	}
	assert.Equal(t, check.StatusOK, installResult(t, after, check.CategoryControlPlane, "control-plane namespace exists").Status)
	assert.Equal(t, check.StatusOK, installResult(t, after, check.CategoryControlPlane, "the Values ConfigMap is valid").Status)
	assert.Equal(t, fmt.Sprintf("Deployment %s/weft-identity: 0 of 1 pods ready; pod weft-identity-0 not ready: phase Pending, not scheduled to a node", ns),
		installResult(t, after, check.CategoryControlPlane, "identity is ready").Message)
	for _, comp := range []string{"destination", "policy", "proxy-injector"} {
		res := installResult(t, after, check.CategoryControlPlane, comp+" is ready")
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Equal(t, fmt.Sprintf("Deployment %s/weft-%s: 0 of 1 pods ready; no pods exist: the Deployment controller has not processed this Deployment (is kube-controller-manager running?)", ns, comp), res.Message)
	}
	assert.Equal(t, check.StatusOK, installResult(t, after, check.CategoryWebhooks, "webhook serving certificate is valid").Status)
	for _, name := range []string{"MutatingWebhookConfiguration " + install.MutatingWebhookConfiguration, "ValidatingWebhookConfiguration " + install.ServiceProfileValidatorConfiguration, "ValidatingWebhookConfiguration " + install.PolicyValidatorConfiguration} {
		res := installResult(t, after, check.CategoryWebhooks, name+" points at a live service")
		assert.Equal(t, check.StatusFail, res.Status)
		assert.Equal(t, fmt.Sprintf("Service %s/weft-proxy-injector has no ready endpoints for port 443 (0 EndpointSlices): the API server cannot reach the webhook", ns), res.Message)
	}
	proxies := installResult(t, after, check.CategoryDataPlane, "meshed pods' proxies are ready")
	assert.Equal(t, check.StatusFail, proxies.Status)
	assert.Equal(t, fmt.Sprintf("1 of 1 meshed pods: %s/web (no status for the proxy: phase Pending, not scheduled to a node)", app), proxies.Message)
	assert.Equal(t, check.StatusOK, installResult(t, after, check.CategoryDataPlane, "meshed pods run the control plane's proxy").Status)
	assert.Equal(t, check.StatusWarn, installResult(t, after, check.CategoryDataPlane, "meshed pods carry the current trust roots").Status,
		"the hand-made pod has no trust-root annotation")

	// And --pre now says the namespace is taken.
	st, pre = installCheck(t, "--pre", "--namespace", ns)
	assert.Equal(t, cli.ExitFailure, st)
	assert.Equal(t, fmt.Sprintf("namespace %q already exists", ns), installResult(t, pre, check.CategoryPreInstall, "control-plane namespace does not exist yet").Message)
}

func installDelete(t *testing.T, c clients, mapper *restmapper.DeferredDiscoveryRESTMapper, o install.Object) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Errorf("cleanup %s: %v", o.GetName(), err)
		return
	}
	ri, err := resourceFor(mapper, &unstructured.Unstructured{Object: m}, c.dyn)
	if err == nil {
		err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
}

func ptrTo[T any](v T) *T { return &v }
