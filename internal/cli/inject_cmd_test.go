package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

const injectInput = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations:
        config.linkerd.io/proxy-cpu-request: 100m
    spec:
      containers:
      - name: web
        image: nginx
        ports:
        - name: http
          containerPort: 80
`

func TestWeftInjectAnnotatesPodTemplatesByDefault(t *testing.T) {
	code, out, errs := runCommand(t, cli.InjectCommand(), injectInput, "-")
	require.Equal(t, cli.ExitOK, code, errs)
	assert.Contains(t, out, "linkerd.io/inject: enabled")
	assert.NotContains(t, out, "weft-proxy")
	assert.Contains(t, errs, `deployment "web"`)
}

func TestWeftInjectManualAddsTheProxyWithAnnotatedResources(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{})
	path := t.TempDir() + "/ca.crt"
	testutil.WriteFile(t, path, anchor.CertPEM)
	code, out, errs := runCommand(t, cli.InjectCommand(), injectInput, "--manual", "--trust-anchors", path, "-")
	require.Equal(t, cli.ExitOK, code, errs)

	var dep struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(out), &dep))
	var proxy *corev1.Container
	pod := dep.Spec.Template.Spec
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "weft-proxy" {
			proxy = &pod.InitContainers[i]
		}
	}
	require.NotNil(t, proxy, "native sidecar weft-proxy among init containers")
	assert.Equal(t, "100m", proxy.Resources.Requests.Cpu().String())
}

func TestWeftInjectRejectsAnInvalidAnnotationNamingIt(t *testing.T) {
	bad := strings.Replace(injectInput, "100m", "100x", 1)
	code, out, errs := runCommand(t, cli.InjectCommand(), bad, "--manual", "-")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Empty(t, out, "nothing written on error")
	assert.Contains(t, errs, "config.linkerd.io/proxy-cpu-request")
	assert.Contains(t, errs, "100x")
}

func TestWeftInjectNeedsAnInput(t *testing.T) {
	code, _, errs := runCommand(t, cli.InjectCommand(), "")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errs, "at least one file")
}

// A Namespace as `kubectl get namespace shop -o yaml` prints it, after
// weft inject annotated it.
const injectedNamespace = `apiVersion: v1
kind: Namespace
metadata:
  annotations:
    config.linkerd.io/proxy-log-level: debug
    linkerd.io/inject: enabled
  creationTimestamp: "2026-12-06T17:00:00Z"
  labels:
    kubernetes.io/metadata.name: shop
  name: shop
  resourceVersion: "4711"
  uid: 2f0c7d1e-3b8a-4c55-9d9e-0a1b2c3d4e5f
spec:
  finalizers:
  - kubernetes
status:
  phase: Active
`

// weft inject annotates Namespaces, so uninjecting only the workloads is
// undone at their next restart: weft uninject's help says so and gives the
// command that uninjects the namespace, and that command's weft step
// does it, keeping what kubectl replace needs (resourceVersion, uid).
func TestUninjectSaysHowToUninjectTheNamespaceAndThatCommandWorks(t *testing.T) {
	const documented = "kubectl get namespace NAME -o yaml | weft uninject - | kubectl replace -f -"
	code, help, _ := runCommand(t, cli.UninjectCommand(), "", "--help")
	require.Equal(t, cli.ExitOK, code)
	assert.Contains(t, help, "linkerd.io/inject")
	assert.Contains(t, help, documented)

	code, inj, errs := runCommand(t, cli.InjectCommand(), "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n", "-")
	require.Equal(t, cli.ExitOK, code, errs)
	assert.Contains(t, inj, "linkerd.io/inject: enabled", "weft inject annotates the namespace")

	code, out, errs := runCommand(t, cli.UninjectCommand(), injectedNamespace, "-")
	require.Equal(t, cli.ExitOK, code, errs)
	assert.Contains(t, errs, `namespace "shop" uninjected`)
	var ns corev1.Namespace
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &ns))
	assert.NotContains(t, ns.Annotations, "linkerd.io/inject")
	assert.Equal(t, "debug", ns.Annotations["config.linkerd.io/proxy-log-level"], "settings stay")
	assert.Equal(t, "4711", ns.ResourceVersion)
	assert.Equal(t, "shop", ns.Labels["kubernetes.io/metadata.name"])
	assert.Equal(t, corev1.NamespaceActive, ns.Status.Phase)
}
