package policyci_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var weftBin string

// TestMain builds the weft CLI once: cmd/weft when it lists the policy
// commands, otherwise the minimal build in testdata/weft.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-policy-ci")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	weftBin = filepath.Join(dir, "weft")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	build := func(pkg string) error {
		out, err := exec.CommandContext(ctx, "go", "build", "-o", weftBin, pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return nil
	}
	err = build("../../cmd/weft")
	if err == nil && exec.CommandContext(ctx, weftBin, "policy", "--help").Run() != nil {
		err = build("./testdata/weft")
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func buildWeft(t *testing.T) string {
	t.Helper()
	return weftBin
}

func TestCIScriptPassesOnTheExampleManifests(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is needed to run ci.sh: %v", err)
	}
	bin := buildWeft(t)
	report := filepath.Join(t.TempDir(), "report.json")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "ci.sh")
	cmd.Env = append(os.Environ(), "WEFT="+bin, "REPORT="+report)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "ci.sh failed:\n%s\n%s", stdout.String(), stderr.String())

	out := stdout.String()
	assert.Equal(t, 2, strings.Count(out, "9 passed, 0 failed"), out)
	assert.Contains(t, out, "PASS api-gateway may call web")
	assert.Contains(t, out, "PASS reports may not call web")
	assert.Contains(t, out, "all policy expectations hold")

	var rep struct {
		Passed, Failed int
		Cases          []struct {
			Name, Got string
			Pass      bool
		}
	}
	data, err := os.ReadFile(report)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, 9, rep.Passed)
	assert.Zero(t, rep.Failed)
}

func TestLinkerdParityCasesPassWithTheCLI(t *testing.T) {
	bin := buildWeft(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "policy", "test", "--manifests", "linkerd-parity/manifests", "--cases", "linkerd-parity/cases.yaml")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "weft policy test failed:\n%s\n%s", stdout.String(), stderr.String())
	assert.Contains(t, stdout.String(), "15 passed, 0 failed")
	// The ignored routes say why, as a route status would.
	assert.Contains(t, stderr.String(), "parity/by-port: spec.parentRefs[0].port: a route may not reference a Server by port")
	assert.Contains(t, stderr.String(), "parity/rewrite: spec.rules[0].filters[0]: URLRewrite filters are not supported")
}

func TestCIScriptFailsWhenAnExpectationBreaks(t *testing.T) {
	bin := buildWeft(t)
	dir := t.TempDir()
	// The same manifests, but the policy now admits reports as well.
	for _, sub := range []string{"base", "authorizationpolicy", "serverauthorization"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "manifests", sub), 0o755))
		entries, err := os.ReadDir(filepath.Join("manifests", sub))
		require.NoError(t, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join("manifests", sub, e.Name()))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", sub, e.Name()), data, 0o644))
		}
	}
	widened := `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: web-reports
  namespace: my-app
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
  - kind: ServiceAccount
    name: reports
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", "authorizationpolicy", "widened.yaml"), []byte(widened), 0o644))
	for _, f := range []string{"ci.sh", "cases.yaml"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o755))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "ci.sh"))
	cmd.Env = append(os.Environ(), "WEFT="+bin)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "FAIL reports may not call web: expected deny, got allow (authorized)")
	assert.Contains(t, string(out), "AuthorizationPolicy my-app/web-reports")
	assert.Contains(t, string(out), "7 passed, 2 failed")
}
