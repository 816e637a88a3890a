package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/internal/testutil"
)

func buildDevApp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devapp")
	cmd := exec.Command("go", "build", "-o", bin, "./testdata/devapp")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func TestDevRunsProgramsInTheMeshAndEnforcesThePolicy(t *testing.T) {
	bin := buildDevApp(t)
	dir := t.TempDir()
	mesh := `namespace: shop
workloads:
- name: api
  ports: [{name: http, port: 8080}]
  command: ["` + bin + `", serve]
- name: web
  calls: [{service: api, localPort: 9000}]
  command: ["` + bin + `", call, API, "3"]
- name: stranger
  calls: [{service: api, localPort: 9000}]
  command: ["` + bin + `", call, API, "3"]
policies:
- workload: api
  port: http
  allow: [web]
`
	cfgPath := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(mesh), 0o600))

	var out, errb testutil.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- DevCommand().Run(ctx, []string{"--config", cfgPath, "--log-level", "warn"}, IO{Stdout: &out, Stderr: &errb})
	}()

	// Wait until both callers are done, or weft dev ends early.
	waitCtx, stopWaiting := context.WithTimeout(ctx, 60*time.Second)
	defer stopWaiting()
	testutil.Poll(waitCtx, func() bool {
		select {
		case code := <-done:
			t.Errorf("weft dev exited early with %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
			done <- code
			return true
		default:
		}
		return strings.Count(out.String(), "done calling") == 2
	})
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, ExitOK, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("weft dev did not stop")
	}
	s := out.String()
	assert.Contains(t, s, "weft dev: mesh ready")
	assert.Contains(t, s, "[web-0] status 200: api-0 says hello")
	assert.NotContains(t, s, "[stranger-0] status 200", "the policy lets only web in")
	strangerLines := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "[stranger-0] call failed") || strings.HasPrefix(l, "[stranger-0] status 403") {
			strangerLines++
		}
	}
	assert.Equal(t, 3, strangerLines, "each of the stranger's calls is denied\n%s", s)
}

func TestDevRejectsABadMeshFileNamingTheField(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte("workloads:\n- name: api\n  ports: [{port: 4143}]\n"), 0o600))
	var out, errb bytes.Buffer
	code := DevCommand().Run(context.Background(), []string{"--config", p}, IO{Stdout: &out, Stderr: &errb})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), "workloads[0].ports[0].port: 4143 is reserved")

	require.NoError(t, os.WriteFile(p, []byte("workloads:\n- name: api\n  prots: [{port: 80}]\n"), 0o600))
	errb.Reset()
	code = DevCommand().Run(context.Background(), []string{"--config", p}, IO{Stdout: &out, Stderr: &errb})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), `unknown field "prots"`)

	errb.Reset()
	code = DevCommand().Run(context.Background(), nil, IO{Stdout: &out, Stderr: &errb})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), "--config FILE is required")
}

func TestDevPrintsTheObjectsAMeshFileExpandsTo(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte("namespace: shop\nworkloads:\n- name: api\n  ports: [{name: http, port: 8080}]\n- name: web\n  calls: [{service: api}]\npolicies:\n- {workload: api, port: http, allow: [web]}\n"), 0o600))
	var out, errb bytes.Buffer
	code := DevCommand().Run(context.Background(), []string{"--config", p, "--print-objects"}, IO{Stdout: &out, Stderr: &errb})
	require.Equal(t, ExitOK, code, errb.String())
	for _, want := range []string{"kind: Pod", "linkerd.io/control-plane-ns: weft", "podIP: 127.0.1.1", "kind: EndpointSlice", "kind: Server", "kind: AuthorizationPolicy", "kind: MeshTLSAuthentication"} {
		assert.Contains(t, out.String(), want)
	}
}
