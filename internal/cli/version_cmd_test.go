package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/install"
)

func controllerDeployment(ns, component, version string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "weft-" + component, Namespace: ns,
		Labels: map[string]string{install.LabelComponent: component, install.LabelVersion: version}}}
}

func TestTheControlPlaneVersionIsReadFromTheControllerDeployments(t *testing.T) {
	ctx := testutil.Context(t, 0)
	kube := fake.NewClientset(
		controllerDeployment("weft", "destination", "v1.2.3"),
		controllerDeployment("weft", "identity", "v1.2.3"),
		controllerDeployment("other", "identity", "v9.9.9"),
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "weft", Labels: map[string]string{install.LabelVersion: "v0"}}},
	)
	cp, err := deploymentsVersion(ctx, kube, "weft")
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", cp.Version)
	assert.Equal(t, map[string]string{"destination": "v1.2.3", "identity": "v1.2.3"}, cp.Components)
	assert.Equal(t, "v1.2.3", cp.text())

	mixed := fake.NewClientset(controllerDeployment("weft", "destination", "v1.2.3"), controllerDeployment("weft", "policy", "v1.3.0"))
	cp, err = deploymentsVersion(ctx, mixed, "weft")
	require.NoError(t, err)
	assert.Empty(t, cp.Version)
	assert.Equal(t, "mixed: v1.2.3 (destination), v1.3.0 (policy)", cp.text())

	_, err = deploymentsVersion(ctx, fake.NewClientset(), "weft")
	assert.ErrorContains(t, err, "no control plane in namespace weft")
}

// unreachableKubeconfig names an API server on a loopback port nothing
// listened on a moment ago (whatever took it since is no API server
// either).
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://" + addr + "\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n"
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o600))
	return p
}

func runVersion(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st := WeftVersionCommand().Run(testutil.Context(t, 0), args, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return st, out.String(), errb.String()
}

func TestVersionPrintsTheStampedClientVersion(t *testing.T) {
	old := core.Version
	t.Cleanup(func() { core.Version = old })
	core.Version = ""
	st, out, _ := runVersion(t, "--client")
	assert.Equal(t, ExitOK, st)
	assert.Equal(t, "Client version: dev\n", out)
	core.Version = "v0.7.1"
	_, out, _ = runVersion(t, "--client", "-o", "json")
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, map[string]any{"client": "v0.7.1"}, rep)
}

func TestVersionWithoutAClusterSaysTheControlPlaneIsUnavailable(t *testing.T) {
	kc := unreachableKubeconfig(t)
	st, out, _ := runVersion(t, "--kubeconfig", kc, "--timeout", "5s")
	assert.Equal(t, ExitOK, st, "unavailable is not a failure unless asked")
	assert.Contains(t, out, "Client version: ")
	assert.Contains(t, out, "Control plane version: unavailable (")

	st, out, _ = runVersion(t, "--kubeconfig", kc, "--timeout", "5s", "--require-control-plane", "-o", "yaml")
	assert.Equal(t, ExitFailure, st)
	var rep versionReport
	require.NoError(t, yaml.Unmarshal([]byte(out), &rep))
	require.NotNil(t, rep.ControlPlane)
	assert.NotEmpty(t, rep.ControlPlane.Unavailable)

	st, _, errs := runVersion(t, "-o", "xml")
	assert.Equal(t, ExitUsage, st)
	assert.Contains(t, errs, `"xml"`)
}
