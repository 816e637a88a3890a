package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
)

const discoveryManifests = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  annotations:
    config.linkerd.io/opaque-ports: "3306"
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  clusterIP: 10.96.0.10
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  labels:
    linkerd.io/control-plane-ns: weft
spec:
  serviceAccountName: web
  containers:
  - name: web
    image: web:1
status:
  podIP: 10.0.0.1
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-a
  namespace: shop
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints:
- addresses: ["10.0.0.1"]
  zone: zone-a
  targetRef: {kind: Pod, name: web-1}
`

// discoveryStartController runs `weft-controller destination --source
// static` on the manifests in dir until the test ends, returning its
// address and logs.
func discoveryStartController(t *testing.T, dir string) (string, *testutil.SyncBuffer) {
	t.Helper()
	return startController(t, cli.DestinationControllerCommand(), "destination service",
		"--addr", "127.0.0.1:0", "--source", "static", "--manifests", dir, "--cluster-domain", "cluster.local")
}

func discoveryWrite(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	require.NoError(t, os.WriteFile(tmp, []byte(data), 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

func discoveryDiagnostics(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut testutil.SyncBuffer
	st := cli.DiagnosticsCommand().Run(ctx, append([]string{"endpoints"}, args...), cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return st, out.String(), errOut.String()
}

func TestDestinationControllerServesStaticManifestsWithHealthAndReflection(t *testing.T) {
	dir := t.TempDir()
	discoveryWrite(t, filepath.Join(dir, "shop.yaml"), discoveryManifests)
	addr, _ := discoveryStartController(t, dir)
	ctx := testutil.Context(t, 0)

	st, out, errOut := discoveryDiagnostics(ctx, "web.shop.svc.cluster.local:80", "--destination", addr)
	require.Equal(t, cli.ExitOK, st, errOut)
	assert.Contains(t, out, "# web.shop.svc.cluster.local:80: 1 endpoint(s)")
	assert.Regexp(t, `10\.0\.0\.1:8080\s+10000\s+web\.shop\.serviceaccount\.identity\.weft\.cluster\.local\s+h2\s+-\s+zone-a\s+web-1\s+-`, out)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "io.linkerd.proxy.destination.Destination"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, h.GetStatus())

	rs, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	require.NoError(t, err)
	require.NoError(t, rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}))
	resp, err := rs.Recv()
	require.NoError(t, err)
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	assert.Contains(t, names, "io.linkerd.proxy.destination.Destination")
	assert.Contains(t, names, "grpc.health.v1.Health")
	require.NoError(t, rs.CloseSend())
}

func TestDiagnosticsEndpointsWatchShowsFileChanges(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	discoveryWrite(t, file, discoveryManifests)
	addr, _ := discoveryStartController(t, dir)
	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	defer cancel()

	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.DiagnosticsCommand().Run(ctx, []string{"endpoints", "--watch", "--destination", addr, "web.shop.svc.cluster.local:80"},
			cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	}()
	testutil.Eventually(t, 0, func() bool { return strings.Contains(out.String(), "10.0.0.1:8080") }, "the first table")

	// A second endpoint (no pod: plaintext) appears in the file.
	discoveryWrite(t, file, strings.Replace(discoveryManifests, "- addresses: [\"10.0.0.1\"]", "- addresses: [\"10.0.0.2\"]\n- addresses: [\"10.0.0.1\"]", 1))
	// The table is written in pieces: wait for its new row, not its header.
	row := regexp.MustCompile(`10\.0\.0\.2:8080\s+10000\s+-\s+unknown`)
	testutil.Eventually(t, 0, func() bool { return row.MatchString(out.String()) }, "the updated table")
	assert.Contains(t, out.String(), "2 endpoint(s)")
	assert.Equal(t, 2, strings.Count(out.String(), "# web.shop.svc.cluster.local:80 at "), "one table per change")

	cancel()
	select {
	case st := <-done:
		assert.Equal(t, cli.ExitOK, st, errOut.String())
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("--watch did not stop on cancellation")
	}
}

func TestDiagnosticsEndpointsReportsUnknownAndMalformedDestinations(t *testing.T) {
	dir := t.TempDir()
	discoveryWrite(t, filepath.Join(dir, "shop.yaml"), discoveryManifests)
	addr, _ := discoveryStartController(t, dir)
	ctx := testutil.Context(t, 0)

	st, out, _ := discoveryDiagnostics(ctx, "--destination", addr, "api.shop.svc.cluster.local:80")
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, out, "does not exist")

	st, _, errOut := discoveryDiagnostics(ctx, "--destination", addr, "web.shop.svc.example.org:80")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, errOut, `not a service name in cluster domain "cluster.local"`)

	st, _, errOut = discoveryDiagnostics(ctx, "--destination", addr)
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, errOut, "want exactly one AUTHORITY")

	st, _, errOut = discoveryDiagnostics(ctx, "--destination", "127.0.0.1:1", "--timeout", "300ms", "web.shop.svc.cluster.local:80")
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, errOut, "no answer from 127.0.0.1:1")
}

func TestDestinationControllerRefusesBadFlagsAndBadManifests(t *testing.T) {
	ctx := testutil.Context(t, 0)
	run := func(args ...string) (int, string) {
		var errOut testutil.SyncBuffer
		st := cli.DestinationControllerCommand().Run(ctx, args, cli.IO{Stdin: strings.NewReader(""), Stdout: &errOut, Stderr: &errOut})
		return st, errOut.String()
	}
	st, msg := run("--source", "consul")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, msg, `--source "consul"`)
	st, msg = run("--source", "static")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, msg, "needs --manifests")
	st, msg = run("--source", "static", "--manifests", t.TempDir(), "--default-opaque-ports", "0")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, msg, "--default-opaque-ports")
	st, msg = run("--source", "static", "--manifests", t.TempDir(), "--cluster-domain", "Not A Domain")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, msg, "cluster domain")

	st, msg = run("--source", "kubernetes", "--manifests", t.TempDir())
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, msg, "--manifests is for --source static")
	st, msg = run("--addr", "127.0.0.1:0", "--source", "kubernetes", "--kubeconfig", filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, msg, "kubernetes configuration")

	dir := t.TempDir()
	discoveryWrite(t, filepath.Join(dir, "bad.yaml"), strings.Replace(discoveryManifests, "addressType", "adressType", 1))
	st, msg = run("--addr", "127.0.0.1:0", "--source", "static", "--manifests", dir)
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, msg, "bad.yaml")
	assert.Contains(t, msg, "adressType")
}
