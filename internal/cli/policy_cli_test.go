package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

const (
	policyBase = "../../examples/policy-ci/manifests/base"
	policyAP   = "../../examples/policy-ci/manifests/authorizationpolicy"
	policySAZ  = "../../examples/policy-ci/manifests/serverauthorization"
	policyCase = "../../examples/policy-ci/cases.yaml"
)

func policyWrite(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestPolicyTestPassesTheSeedCasesWithEitherAuthorization(t *testing.T) {
	for _, alt := range []string{policyAP, policySAZ} {
		code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", alt, "--cases", policyCase)
		require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		assert.Equal(t, "9 passed, 0 failed", lines[len(lines)-1])
		assert.Contains(t, out, "PASS api-gateway may call web\n")
		assert.Contains(t, out, "PASS reports may not call web\n")
	}
}

func TestPolicyTestReportsAFailedCaseWithItsExplanationAndExitsOne(t *testing.T) {
	dir := t.TempDir()
	cases := policyWrite(t, dir, "cases.yaml", `cases:
- name: reports may call web
  from: {serviceAccount: reports, namespace: my-app}
  to: {workload: deployment/web, namespace: my-app, port: http}
  expect: allow
- name: api-gateway may call web
  from: {serviceAccount: api-gateway, namespace: my-app}
  to: {workload: deployment/web, namespace: my-app, port: http}
  expect: allow
`)
	code, out, _ := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--cases", cases)
	assert.Equal(t, cli.ExitFailure, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Equal(t, "FAIL reports may call web: expected allow, got deny (unauthorized)", lines[0])
	assert.Contains(t, out, "AuthorizationPolicy my-app/web-api-gateway")
	assert.Contains(t, out, "is not among identities api-gateway.my-app.serviceaccount.identity.weft.cluster.local")
	assert.Contains(t, out, "PASS api-gateway may call web\n")
	assert.Equal(t, "1 passed, 1 failed", lines[len(lines)-1])
}

func TestPolicyTestWritesJSON(t *testing.T) {
	code, out, _ := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--cases", policyCase, "-o", "json")
	require.Equal(t, cli.ExitOK, code)
	var rep struct {
		Passed, Failed int
		Cases          []struct {
			Name, Expected, Got, Reason, Server, Authorization string
			Pass                                               bool
			Explanation                                        []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 9, rep.Passed)
	require.Len(t, rep.Cases, 9)
	assert.Equal(t, "allow", rep.Cases[0].Got)
	assert.Equal(t, "Server my-app/web-http", rep.Cases[0].Server)
	assert.Equal(t, "AuthorizationPolicy my-app/web-api-gateway", rep.Cases[0].Authorization)
	assert.NotEmpty(t, rep.Cases[0].Explanation)
}

func TestPolicyTestHonoursTheConfigurationFlags(t *testing.T) {
	dir := t.TempDir()
	cases := policyWrite(t, dir, "cases.yaml", `cases:
- name: the admin port is denied by the default
  from: {unauthenticated: true}
  to: {workload: deployment/web, namespace: my-app, port: admin}
  expect: deny
- name: another trust domain names the gateway differently
  from: {identity: api-gateway.my-app.serviceaccount.identity.linkerd.example.org}
  to: {workload: deployment/web, namespace: my-app, port: http}
  expect: allow
`)
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--cases", cases,
		"--default-policy", "deny", "--trust-domain", "example.org", "--control-plane-namespace", "linkerd", "--cluster-networks", "192.168.0.0/16")
	assert.Equal(t, cli.ExitOK, code, "%s\n%s", out, errOut)
}

func TestPolicyTestRefusesInvalidInputWithExitTwo(t *testing.T) {
	dir := t.TempDir()
	badManifest := policyWrite(t, dir, "bad.yaml", `apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: web-http, namespace: my-app}
spec:
  podSelectr: {matchLabels: {app: web}}
  port: http
`)
	badCIDR := policyWrite(t, dir, "netauthn.yaml", `apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata: {name: office, namespace: my-app}
spec:
  networks:
  - cidr: 10.0.0.0/33
`)
	badCases := policyWrite(t, dir, "badcases.yaml", `cases:
- name: typo
  from: {serviceAcount: web, namespace: my-app}
  to: {workload: deployment/web, namespace: my-app, port: http}
  expect: allow
`)
	unknownWorkload := policyWrite(t, dir, "unknown.yaml", `cases:
- name: nowhere
  from: {unauthenticated: true}
  to: {workload: deployment/api, namespace: shop, port: 8080}
  expect: deny
`)
	badExpect := policyWrite(t, dir, "expect.yaml", `cases:
- name: maybe
  from: {unauthenticated: true}
  to: {workload: deployment/web, namespace: my-app, port: 8080}
  expect: perhaps
`)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown field in a manifest", []string{"--manifests", badManifest, "--cases", policyCase}, []string{"bad.yaml", "document 1", "spec.podSelectr"}},
		{"malformed CIDR", []string{"--manifests", policyBase, "--manifests", badCIDR, "--cases", policyCase}, []string{"netauthn.yaml document 1", "spec.networks[0]", "10.0.0.0/33"}},
		{"unknown field in the cases", []string{"--manifests", policyBase, "--cases", badCases}, []string{"badcases.yaml", "document 1", "cases[0] (typo).from.serviceAcount", "unknown field"}},
		{"unknown workload", []string{"--manifests", policyBase, "--cases", unknownWorkload}, []string{"unknown.yaml", "cases[0] (nowhere).to.workload", "deployment/api"}},
		{"unknown decision", []string{"--manifests", policyBase, "--cases", badExpect}, []string{"expect.yaml", "cases[0] (maybe).expect", "perhaps"}},
		{"missing cases", []string{"--manifests", policyBase}, []string{"--cases"}},
		{"missing manifests", []string{"--cases", policyCase}, []string{"--manifests"}},
		{"bad default policy", []string{"--manifests", policyBase, "--cases", policyCase, "--default-policy", "open"}, []string{"open"}},
		{"bad cluster network", []string{"--manifests", policyBase, "--cases", policyCase, "--cluster-networks", "10.0.0.0/40"}, []string{"10.0.0.0/40"}},
		{"bad output", []string{"--manifests", policyBase, "--cases", policyCase, "-o", "xml"}, []string{"-o"}},
		{"missing file", []string{"--manifests", filepath.Join(dir, "nope"), "--cases", policyCase}, []string{"nope"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCommand(t, cli.PolicyCommand(), "", append([]string{"test"}, c.args...)...)
			assert.Equal(t, cli.ExitUsage, code, "stdout: %s", out)
			for _, w := range c.want {
				assert.Contains(t, errOut, w)
			}
		})
	}
}

func TestPolicyTestWarnsAboutLintsWithoutFailing(t *testing.T) {
	dir := t.TempDir()
	extra := policyWrite(t, dir, "lint.yaml", `apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: dangling, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: no-such-server}
  requiredAuthenticationRefs:
  - {kind: ServiceAccount, name: api-gateway}
---
apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata: {name: lonely, namespace: my-app}
spec:
  podSelector: {matchLabels: {app: nobody}}
  port: 8080
`)
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--manifests", extra, "--cases", policyCase)
	assert.Equal(t, cli.ExitOK, code, out)
	assert.Contains(t, errOut, "warning: "+extra+" document 1: AuthorizationPolicy my-app/dangling: spec.targetRef: Server my-app/no-such-server not found")
	assert.Contains(t, errOut, "Server my-app/lonely: spec.podSelector: selects no workload")
	assert.True(t, strings.HasSuffix(out, "9 passed, 0 failed\n"))
}

func TestPolicyExplainPrintsTheDecisionAndItsReasons(t *testing.T) {
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase, "--manifests", policyAP,
		"--from-service-account", "reports", "--from-namespace", "my-app",
		"--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "http", "--path", "/public/../items", "--header", "x-tenant: a")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "decision: deny (unauthorized)\n"), out)
	assert.Contains(t, out, "normalized from \"/public/../items\"")
	assert.Contains(t, out, "Server my-app/web-http")

	code, out, _ = runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase, "--manifests", policyAP,
		"--from-identity", "api-gateway.my-app.serviceaccount.identity.weft.cluster.local",
		"--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "8080", "-o", "json")
	require.Equal(t, cli.ExitOK, code)
	var got struct{ Decision, Authorization string }
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "allow", got.Decision)
	assert.Equal(t, "AuthorizationPolicy my-app/web-api-gateway", got.Authorization)

	code, _, errOut = runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase,
		"--from-unauthenticated", "--from-identity", "x.y", "--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "8080")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errOut, "exactly one")
}

func TestAuthzListsThePoliciesOfAWorkload(t *testing.T) {
	code, out, errOut := runCommand(t, cli.AuthzCommand(), "", "--manifests", policyBase, "--manifests", policyAP, "-n", "my-app", "deployment/web")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "meshed")
	assert.Contains(t, out, "8080/http")
	assert.Contains(t, out, "AuthorizationPolicy my-app/web-api-gateway")
	assert.Contains(t, out, "9990/admin")
	assert.Contains(t, out, "default:all-unauthenticated")

	code, _, errOut = runCommand(t, cli.AuthzCommand(), "", "--manifests", policyBase, "-n", "my-app", "deployment/nope")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, errOut, "not found")

	code, out, _ = runCommand(t, cli.AuthzCommand(), "", "deployment/web", "--manifests", policyBase, "--manifests", policySAZ, "-n", "my-app", "-o", "json")
	require.Equal(t, cli.ExitOK, code)
	assert.Contains(t, out, `"authorization": "ServerAuthorization my-app/web-authz-legacy"`)
}

func TestPolicyControllerServesInboundAndOutboundFromFiles(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	pod := policyWrite(t, t.TempDir(), "pod.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: my-app, labels: {app: web}}
spec:
  serviceAccountName: web
  containers:
  - name: web
    image: example/web
    ports: [{name: http, containerPort: 8080}]
`)

	ctx, cancel := context.WithCancel(context.Background())
	var stderr testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.PolicyControllerCommand().Run(ctx, []string{"--addr", addr, "--source", "static",
			"--manifests", policyBase, "--manifests", policyAP, "--manifests", pod, "--log-level", "debug",
			"--metrics-addr", metricsAddr}, cli.IO{Stdout: &stderr, Stderr: &stderr})
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, cli.ExitOK, code, stderr.String())
		case <-time.After(15 * time.Second):
			t.Error("the controller did not stop")
		}
	}()

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	testutil.Eventually(t, 10*time.Second, func() bool {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		r, err := health.Check(rctx, &healthpb.HealthCheckRequest{Service: "io.linkerd.proxy.inbound.InboundServerPolicies"})
		return err == nil && r.Status == healthpb.HealthCheckResponse_SERVING
	}, "the controller to serve")

	rctx := testutil.Context(t, 10*time.Second)
	in := inbound.NewInboundServerPoliciesClient(conn)
	srv, err := in.GetPort(rctx, &inbound.PortSpec{Workload: "my-app:web-0", Port: 8080})
	require.NoError(t, err)
	assert.Equal(t, "web-http", srv.Labels["name"])
	pol8080, err := authz.FromProto(srv)
	require.NoError(t, err)
	gw := authz.Conn{IP: netip.MustParseAddr("10.1.1.1"), TLS: true, Identity: "api-gateway.my-app.serviceaccount.identity.weft.cluster.local"}
	assert.Equal(t, authz.Allow, authz.Evaluate(pol8080, gw, nil).Decision)
	gw.Identity = "reports.my-app.serviceaccount.identity.weft.cluster.local"
	assert.Equal(t, authz.Deny, authz.Evaluate(pol8080, gw, nil).Decision)

	_, err = in.GetPort(rctx, &inbound.PortSpec{Workload: "my-app:web-1", Port: 8080})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = in.GetPort(rctx, &inbound.PortSpec{Workload: "not a workload", Port: 8080})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = in.GetPort(rctx, &inbound.PortSpec{Workload: "my-app:web-0", Port: 70000})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	pol, err := outbound.NewOutboundPoliciesClient(conn).Get(rctx, &outbound.TrafficSpec{
		SourceWorkload: "my-app:api-gateway-0", Target: &outbound.TrafficSpec_Authority{Authority: "web.my-app.svc.cluster.local:80"}})
	require.NoError(t, err)
	assert.Equal(t, "web", pol.GetMetadata().GetResource().GetName())
	assert.NotNil(t, pol.GetProtocol().GetDetect())

	// A watch stream is ended cleanly when the controller shuts down.
	stream, err := outbound.NewOutboundPoliciesClient(conn).Watch(rctx, &outbound.TrafficSpec{
		Target: &outbound.TrafficSpec_Authority{Authority: "web.my-app.svc.cluster.local:80"}})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err)

	// The policy metrics are served on --metrics-addr: the stream above is
	// counted before its first message, and the first index build was
	// observed.
	text := scrape(t, "http://"+metricsAddr+"/metrics")
	assert.Contains(t, text, "\nweft_policy_watch_streams 1\n")
	assert.Regexp(t, `\nweft_policy_index_rebuild_seconds_count [1-9]`, text)
	assert.Contains(t, text, "\nweft_grpc_watches 1\n", "the server limits are served too")
}

// scrape returns the Prometheus text a /metrics endpoint serves.
func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 10*time.Second), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func TestPolicyTestTellsNoRouteFromUnauthorizedAndTakesTLSClientsAndProbeNetworks(t *testing.T) {
	dir := t.TempDir()
	manifests := policyWrite(t, dir, "extra.yaml", `apiVersion: policy.linkerd.io/v1beta1
kind: ServerAuthorization
metadata: {name: web-any-tls, namespace: my-app}
spec:
  server: {name: web-http}
  client:
    meshTLS: {unauthenticatedTLS: true}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-items, namespace: my-app}
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /items}}]
`)
	cases := policyWrite(t, dir, "cases.yaml", `cases:
- name: a TLS client without identity is admitted by unauthenticatedTLS
  from: {tls: true}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /items}
  expect: {allow: authorized}
- name: a plaintext client is not
  from: {unauthenticated: true}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /items}
  expect: {deny: unauthorized}
- name: a path no route matches is a 404, not a 403
  from: {tls: true}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /elsewhere}
  expect: {deny: no-route}
- name: a probe from outside the probe networks is denied
  from: {unauthenticated: true, ip: 192.0.2.10}
  to: {workload: deployment/web, namespace: my-app, port: admin}
  request: {path: /live}
  expect: {deny: unauthorized}
- name: a probe from the probe networks is allowed
  from: {unauthenticated: true, ip: 10.1.2.3}
  to: {workload: deployment/web, namespace: my-app, port: admin}
  request: {path: /live}
  expect: allow
- name: the workload's own processes always pass
  from: {unauthenticated: true, ip: 127.0.0.1}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /elsewhere}
  expect: {allow: loopback}
`)
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--manifests", manifests,
		"--cases", cases, "--default-policy", "deny", "--probe-networks", "10.0.0.0/8")
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "6 passed, 0 failed")

	// The reason decides as much as the decision.
	wrong := policyWrite(t, dir, "wrong.yaml", `cases:
- name: expecting a 403 where the proxy answers 404
  from: {tls: true}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /elsewhere}
  expect: {deny: unauthorized}
`)
	code, out, _ = runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--manifests", manifests, "--cases", wrong)
	assert.Equal(t, cli.ExitFailure, code)
	assert.Contains(t, out, "FAIL expecting a 403 where the proxy answers 404: expected deny (unauthorized), got deny (no-route)")

	// Without --probe-networks probes come from anywhere; an empty value
	// turns the probe authorization off.
	probe := policyWrite(t, dir, "probe.yaml", `cases:
- name: probe from anywhere
  from: {unauthenticated: true, ip: 192.0.2.10}
  to: {workload: deployment/web, namespace: my-app, port: admin}
  request: {path: /live}
  expect: allow
`)
	code, out, _ = runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--cases", probe, "--default-policy", "deny")
	assert.Equal(t, cli.ExitOK, code, out)
	code, out, _ = runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--cases", probe, "--default-policy", "deny", "--probe-networks", "")
	assert.Equal(t, cli.ExitFailure, code, out)

	for name, body := range map[string]string{
		"unknown reason":     "expect: {deny: forbidden}",
		"reason of another":  "expect: {allow: no-route}",
		"two decisions":      "expect: {allow: authorized, deny: no-route}",
		"tls not a boolean":  "expect: deny\n  from: {tls: yes-please}",
		"tls and identity":   "expect: deny\n  from: {tls: true, unauthenticated: true}",
		"bad probe networks": "",
	} {
		t.Run(name, func(t *testing.T) {
			args := []string{"test", "--manifests", policyBase}
			content := "cases:\n- name: x\n  from: {unauthenticated: true}\n  to: {workload: deployment/web, namespace: my-app, port: http}\n  " + body + "\n"
			if strings.Contains(body, "from:") {
				content = "cases:\n- name: x\n  to: {workload: deployment/web, namespace: my-app, port: http}\n  " + body + "\n"
			}
			if body == "" {
				content = "cases:\n- name: x\n  from: {unauthenticated: true}\n  to: {workload: deployment/web, namespace: my-app, port: http}\n  expect: deny\n"
				args = append(args, "--probe-networks", "10.0.0.0/33")
			}
			args = append(args, "--cases", policyWrite(t, dir, "bad.yaml", content))
			code, _, errOut := runCommand(t, cli.PolicyCommand(), "", args...)
			assert.Equal(t, cli.ExitUsage, code, errOut)
			assert.NotEmpty(t, errOut)
		})
	}
}

func TestPolicyExplainTakesATLSClientAndSaysWhenLoopbackDecides(t *testing.T) {
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase, "--manifests", policyAP,
		"--from-tls", "--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "http")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "decision: deny (unauthorized)")
	assert.Contains(t, out, "mesh TLS without identity")

	code, out, errOut = runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase, "--manifests", policyAP,
		"--from-unauthenticated", "--from-ip", "::1", "--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "http")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.Contains(t, out, "decision: allow (loopback)")
	assert.Contains(t, out, "the workload's own processes are always allowed")
}

func TestPolicyExplainShowsTheRateLimitThatCountsAnAdmittedRequest(t *testing.T) {
	rl := policyWrite(t, t.TempDir(), "ratelimit.yaml", `apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: web-rl, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  total: {requestsPerSecond: 100}
  identity: {requestsPerSecond: 20}
  overrides:
  - requestsPerSecond: 50
    clientRefs: [{kind: ServiceAccount, name: api-gateway}]
`)
	args := []string{"explain", "--manifests", policyBase, "--manifests", policyAP, "--manifests", rl,
		"--from-service-account", "api-gateway", "--from-namespace", "my-app",
		"--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "http", "--path", "/items"}
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", args...)
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "decision: allow (authorized)\n"), out)
	assert.Contains(t, out, "rate limit HTTPLocalRateLimitPolicy my-app/web-rl: total 100/s, per identity 20/s, 1 override: "+
		"each HTTP request from this client counts against the total limit of 100/s that all clients share, then against its override limit of 50/s")

	code, out, errOut = runCommand(t, cli.PolicyCommand(), "", append(args, "-o", "json")...)
	require.Equal(t, cli.ExitOK, code, errOut)
	var got struct {
		Decision  string
		RateLimit struct {
			Policy      string
			Total       uint32
			ClientScope string
			Client      uint32
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "allow", got.Decision)
	assert.Equal(t, "HTTPLocalRateLimitPolicy my-app/web-rl", got.RateLimit.Policy)
	assert.Equal(t, uint32(100), got.RateLimit.Total)
	assert.Equal(t, "override", got.RateLimit.ClientScope)
	assert.Equal(t, uint32(50), got.RateLimit.Client)

	// A client the Server refuses is never counted.
	code, out, errOut = runCommand(t, cli.PolicyCommand(), "", "explain", "--manifests", policyBase, "--manifests", policyAP, "--manifests", rl,
		"--from-service-account", "reports", "--from-namespace", "my-app",
		"--to-workload", "deployment/web", "--to-namespace", "my-app", "--to-port", "http", "--path", "/items")
	require.Equal(t, cli.ExitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "decision: deny"), out)
	assert.NotContains(t, out, "rate limit")
}

func TestPolicyTestSaysWhichRateLimitCountsAPassingRequest(t *testing.T) {
	dir := t.TempDir()
	rl := policyWrite(t, dir, "ratelimit.yaml", `apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: web-rl, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  total: {requestsPerSecond: 100}
  identity: {requestsPerSecond: 20}
`)
	cases := policyWrite(t, dir, "cases.yaml", `cases:
- name: api-gateway may call web
  from: {serviceAccount: api-gateway, namespace: my-app}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /items}
  expect: allow
- name: reports may not call web
  from: {serviceAccount: reports, namespace: my-app}
  to: {workload: deployment/web, namespace: my-app, port: http}
  request: {path: /items}
  expect: deny
`)
	code, out, errOut := runCommand(t, cli.PolicyCommand(), "", "test", "--manifests", policyBase, "--manifests", policyAP, "--manifests", rl, "--cases", cases)
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.Contains(t, out, "PASS api-gateway may call web\n  rate limit HTTPLocalRateLimitPolicy my-app/web-rl: total 100/s, per identity 20/s: "+
		"each HTTP request from this client counts against the total limit of 100/s that all clients share, then against its own per-identity limit of 20/s; "+
		"beyond them the proxy answers 429 Too Many Requests (gRPC: RESOURCE_EXHAUSTED)\n")
	assert.Contains(t, out, "PASS reports may not call web\n2 passed, 0 failed\n", "a denied request is never counted, so no limit is shown")
}
