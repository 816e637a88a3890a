package cli_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

const diagnosticsPolicyManifests = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web}}
spec:
  serviceAccountName: web
  containers:
  - name: web
    image: web:1
    ports: [{name: http, containerPort: 8080}]
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: shop}
spec: {podSelector: {matchLabels: {app: web}}, port: http, proxyProtocol: HTTP/1}
---
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata: {name: items, namespace: shop}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules: [{matches: [{path: {type: PathPrefix, value: /items}}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec: {clusterIP: 10.96.0.10, selector: {app: web}, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: canary, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{matches: [{path: {type: PathPrefix, value: /beta}}], backendRefs: [{name: web, port: 80}]}]
`

// startPolicyController runs `weft-controller policy` on loopback over
// the manifests and returns its address.
func startPolicyController(t *testing.T, manifests string) string {
	t.Helper()
	dir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(dir, "shop.yaml"), []byte(manifests))
	addr, _ := startController(t, cli.PolicyControllerCommand(), "policy controller", "--addr", "127.0.0.1:0", "--source", "static", "--manifests", dir)
	return addr
}

func diagnosticsPolicy(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCommand(t, cli.DiagnosticsCommand(), "", append([]string{"policy"}, args...)...)
}

// field walks a decoded JSON object along keys.
func field(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for _, k := range keys {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v is not an object (at %q)", v, k)
		v = m[k]
	}
	return v
}

func TestDiagnosticsPolicyPrintsWhatAProxyReceivesForAPodPort(t *testing.T) {
	addr := startPolicyController(t, diagnosticsPolicyManifests)

	code, out, errOut := diagnosticsPolicy(t, "-n", "shop", "po/web-0", "8080", "--policy", addr, "-o", "json")
	require.Equal(t, cli.ExitOK, code, errOut)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "web-http", field(t, got, "labels", "name"), "the Server that selects the port")
	routes, _ := field(t, got, "protocol", "http1", "routes").([]any)
	require.Len(t, routes, 1, out)
	assert.Equal(t, "items", field(t, routes[0], "metadata", "resource", "name"), "the attached HTTPRoute")

	// YAML is the default, with the same content.
	code, out, errOut = diagnosticsPolicy(t, "--namespace", "shop", "pod/web-0", "8080", "--policy", addr)
	require.Equal(t, cli.ExitOK, code, errOut)
	var fromYAML map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &fromYAML), out)
	assert.Equal(t, got, fromYAML)
}

func TestDiagnosticsPolicyPrintsWhatAClientReceivesForAServicePort(t *testing.T) {
	addr := startPolicyController(t, diagnosticsPolicyManifests)

	code, out, errOut := diagnosticsPolicy(t, "-n", "shop", "svc/web", "80", "--policy", addr, "-o", "json")
	require.Equal(t, cli.ExitOK, code, errOut)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	assert.Equal(t, "web", field(t, got, "metadata", "resource", "name"), out)
	assert.Equal(t, "Service", field(t, got, "metadata", "resource", "kind"), out)
	routes, _ := field(t, got, "protocol", "detect", "http1", "routes").([]any)
	var names []any
	for _, r := range routes {
		names = append(names, field(t, r, "metadata", "resource", "name"))
	}
	assert.Contains(t, names, "canary", out)
}

func TestDiagnosticsPolicyRefusesBadArgumentsAndReportsUnknownObjects(t *testing.T) {
	addr := startPolicyController(t, diagnosticsPolicyManifests)
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"not a pod or Service", []string{"-n", "shop", "deploy/web", "80"}, cli.ExitUsage, "neither a pod (po) nor a Service (svc)"},
		{"no kind", []string{"-n", "shop", "web-0", "80"}, cli.ExitUsage, "want po/NAME or svc/NAME"},
		{"port zero", []string{"-n", "shop", "po/web-0", "0"}, cli.ExitUsage, `PORT "0"`},
		{"port too big", []string{"-n", "shop", "po/web-0", "65536"}, cli.ExitUsage, `PORT "65536"`},
		{"port not a number", []string{"-n", "shop", "po/web-0", "http"}, cli.ExitUsage, `PORT "http"`},
		{"name Kubernetes would refuse", []string{"-n", "shop", "po/Web_0", "8080"}, cli.ExitUsage, "not a valid object name"},
		{"namespace Kubernetes would refuse", []string{"-n", "shop:x", "po/web-0", "8080"}, cli.ExitUsage, "not a valid namespace name"},
		{"one argument", []string{"-n", "shop", "po/web-0"}, cli.ExitUsage, "want RESOURCE and PORT"},
		{"bad output", []string{"-n", "shop", "po/web-0", "8080", "-o", "table"}, cli.ExitUsage, "table"},
		{"both ways to reach the controller", []string{"-n", "shop", "po/web-0", "8080", "--policy-pod", "weft-policy-0"}, cli.ExitUsage, "do not go together"},
		{"unknown pod", []string{"-n", "shop", "po/nope", "8080"}, cli.ExitFailure, "pod nope in shop, port 8080"},
		{"unknown Service", []string{"-n", "shop", "svc/nope", "80"}, cli.ExitFailure, "Service nope in shop, port 80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := diagnosticsPolicy(t, append(tc.args, "--policy", addr)...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.says)
			assert.Empty(t, out, "nothing printed on stdout")
		})
	}
}
