//go:build clusterintegration

package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/install"
	"github.com/weftmesh/weft/mesh/install/check"
)

// mesh carries what one step leaves for the next.
type mesh struct {
	e   *env
	dir string
	// cleanup is the whole test's Cleanup, for what all steps share.
	cleanup func(func())
	// installArgs are the flags of `weft install`; pinned adds the
	// certificates the first install generated, so later renders are the
	// same install.
	installArgs, pinned []string
	certs               string
	app                 string // the application's namespace
	demoNS              string // the demo application's namespace (step 3d)
	plain               string // a namespace without injection
	// pods of the application at the end of step 2, by app.
	pods map[string]corev1.Pod
}

// TestMeshOnARealNode installs Weft from this tree's images on the local
// cluster and proves the mesh end to end, one step after another (a failed
// step ends the test): install and check; an injected application; traffic
// meshed and policy enforced; operations under traffic; uninstall.
func TestMeshOnARealNode(t *testing.T) {
	e := setup(t)
	m := &mesh{e: e, dir: t.TempDir(), cleanup: t.Cleanup, pods: map[string]corev1.Pod{}}
	for _, step := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"1_install_and_check", m.install},
		{"2_injected_application", m.application},
		{"3a_traffic_is_meshed", m.meshed},
		{"3b_policy_enforced", m.policyEnforced},
		{"3c_tap_and_top", m.tapAndTop},
		{"3d_demo_application", m.demo},
		{"3e_route_policy_live_with_status", m.routePolicyLive},
		{"3f_demo_tap_and_top", m.demoTapAndTop},
		{"3g_demo_rolling_restarts_under_calls", m.demoRollingRestarts},
		{"3h_rate_limit_enforced", m.rateLimited},
		{"3i_egress_network", m.egressNetwork},
		{"3j_tracing", m.tracing},
		{"3k_tcp_and_tls_routes", m.tcpAndTLSRoutes},
		{"4a_rolling_restarts_of_the_controllers", m.restartControllers},
		{"4b_scaling_under_calls", m.scale},
		{"4c_issuer_rotation", m.rotateIssuer},
		{"4d_injector_down_follows_the_failure_policy", m.injectorDown},
		{"5_uninstall_leaves_nothing", m.uninstall},
		{"6_every_walkthrough_command_ran", m.walkthroughRan},
	} {
		if !t.Run(step.name, step.run) && !independentStep[step.name] {
			// 3b to 3j leave nothing behind that later steps use (3b's,
			// 3e's and 3h's policies, 3i's EgressNetwork and 3e's
			// Gateway API CRDs are deleted however they end, 3c's RBAC,
			// the demo application and 3j's namespaces are their own),
			// so they still run.
			t.Fatalf("step %s failed; later steps depend on it", step.name)
		}
	}
}

// independentStep names the steps whose failure does not stop the later
// ones.
var independentStep = map[string]bool{"3b_policy_enforced": true, "3c_tap_and_top": true, "3d_demo_application": true, "3e_route_policy_live_with_status": true, "3f_demo_tap_and_top": true, "3g_demo_rolling_restarts_under_calls": true, "3h_rate_limit_enforced": true, "3i_egress_network": true, "3j_tracing": true, "3k_tcp_and_tls_routes": true}

// The Values of the test install: this tree's images, never pulled.
const testValues = `proxy:
  image:
    pullPolicy: Never
proxyInit:
  image:
    pullPolicy: Never
`

func (m *mesh) install(t *testing.T) {
	e := m.e
	code, crds, errs := e.weftCmd(t, nil, "install", "--crds")
	require.Equal(t, 0, code, errs)
	e.waitCRDsEstablished(t, e.applyManifest(t, crds))

	values := filepath.Join(m.dir, "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(testValues), 0o644))
	m.certs = filepath.Join(m.dir, "certs")
	// Short leaf lifetimes so that the issuer rotation of step 4 shows
	// within minutes (proxies renew at 70% of the lifetime).
	m.installArgs = []string{"--values", values, "--identity-issuance-lifetime", "2m", "--controller-image-pull-policy", "Never"}
	code, manifest, errs := e.weftCmd(t, nil, append([]string{"install", "--certs-out", m.certs}, m.installArgs...)...)
	require.Equal(t, 0, code, errs)
	m.pinned = append(append([]string{}, m.installArgs...),
		"--identity-trust-anchors-file", filepath.Join(m.certs, "ca.crt"),
		"--identity-issuer-dir", filepath.Join(m.certs, "issuer"),
		"--webhook-cert-dir", filepath.Join(m.certs, "webhook"),
		"--tap-cert-dir", filepath.Join(m.certs, "tap"))
	objs := e.applyManifest(t, manifest)

	// The rendered images are this tree's.
	var deployments []string
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == "Deployment" {
			deployments = append(deployments, o.GetName())
		}
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == install.ConfigMapValues {
			assert.Contains(t, cm.Data["values.yaml"], e.images["weft-proxy"].Ref[strings.LastIndex(e.images["weft-proxy"].Ref, ":")+1:])
		}
	}
	require.Len(t, deployments, 5, "the four controllers and the tap API")
	for _, d := range deployments {
		eventually(t, 5*time.Minute, "deployment "+d+" rolled out", func(ctx context.Context) error {
			return e.rolledOut(ctx, vocab.DefaultControlPlaneNamespace, d)
		})
	}
	pods, err := e.kube.CoreV1().Pods(vocab.DefaultControlPlaneNamespace).List(timeout(t, time.Minute), metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			assert.Equal(t, e.images["weft-controller"].Ref, cs.Image, "pod %s", p.Name)
			assert.Contains(t, cs.ImageID, e.images["weft-controller"].Config, "pod %s runs the weft-controller image built from this tree", p.Name)
		}
	}

	// Right after the install, as a user would run it: check waits for
	// what is still starting.
	rep := m.check(t, "--wait", "2m")
	assert.True(t, rep.Success)
	assert.Zero(t, rep.Count(check.StatusFail))
}

// check runs `weft check -o json` with args, logs it and returns the
// report; a failing check fails the test.
func (m *mesh) check(t *testing.T, args ...string) check.Report {
	t.Helper()
	code, out, errs := m.e.weftCmd(t, nil, append([]string{"check", "-o", "json"}, args...)...)
	var rep check.Report
	require.NoError(t, json.Unmarshal(out, &rep), "weft check: %s %s", out, errs)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	t.Logf("weft check %s:\n%s", strings.Join(args, " "), text.String())
	require.Equal(t, 0, code, "weft check %s failed:\n%s", strings.Join(args, " "), text.String())
	return rep
}

func (m *mesh) application(t *testing.T) {
	e := m.e
	m.app = e.appNamespace(t, m.cleanup, "shop", true)
	m.plain = e.appNamespace(t, m.cleanup, "plain", false)
	e.deployApp(t, m.app, "backend")
	e.deployApp(t, m.app, "frontend", "--upstream", fmt.Sprintf("http://backend:%d", httpPort))
	e.deployApp(t, m.app, "client")
	e.deployApp(t, m.app, "intruder")
	e.deployApp(t, m.plain, "plain")
	for _, d := range []string{"backend", "frontend", "client", "intruder"} {
		eventually(t, 5*time.Minute, "deployment "+d+" rolled out", func(ctx context.Context) error { return e.rolledOut(ctx, m.app, d) })
		m.pods[d] = e.onePod(t, m.app, d)
	}
	eventually(t, 5*time.Minute, "the plain deployment rolled out", func(ctx context.Context) error { return e.rolledOut(ctx, m.plain, "plain") })

	for name, p := range m.pods {
		assertInjected(t, name, p, e)
	}
	plain := e.onePod(t, m.plain, "plain")
	assert.Empty(t, plain.Spec.InitContainers, "a pod outside the injected namespace has no proxy")

	// The proxies got certificates for their service accounts' identities
	// with their projected tokens (TokenReview): the metrics report them.
	for name, p := range m.pods {
		eventually(t, 2*time.Minute, name+"'s proxy has a certificate", func(ctx context.Context) error {
			ms, err := e.proxyMetrics(ctx, p)
			if err != nil {
				return err
			}
			if sum(ms, "identity_cert_expiration_timestamp_seconds", nil) <= float64(time.Now().Unix()) {
				return fmt.Errorf("no valid certificate yet")
			}
			return nil
		})
		id := e.peerIdentity(t, p)
		assert.Equal(t, identityOf(name, m.app), id, "the identity %s's proxy presents", name)
	}
	m.check(t, "--proxy")
}

// assertInjected checks what the real API server and injector made of a pod:
// weft-proxy as a native sidecar, weft-init non-root with NET_ADMIN and
// NET_RAW only, a projected token for the identity service.
func assertInjected(t *testing.T, name string, p corev1.Pod, e *env) {
	t.Helper()
	var proxy, init *corev1.Container
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		switch c.Name {
		case vocab.ProxyContainerName:
			proxy = c
		case vocab.InitContainerName:
			init = c
		}
	}
	require.NotNil(t, init, "%s has a weft-init container", name)
	require.NotNil(t, proxy, "%s has weft-proxy as an init container (native sidecar)", name)
	require.NotNil(t, proxy.RestartPolicy)
	assert.Equal(t, corev1.ContainerRestartPolicyAlways, *proxy.RestartPolicy, "%s: native sidecar", name)
	assert.Equal(t, e.images["weft-proxy"].Ref, proxy.Image)
	assert.Equal(t, e.images["weft-init"].Ref, init.Image)

	sc := init.SecurityContext
	require.NotNil(t, sc, "%s: weft-init security context", name)
	var uid *int64
	if p.Spec.SecurityContext != nil {
		uid = p.Spec.SecurityContext.RunAsUser
	}
	if sc.RunAsUser != nil {
		uid = sc.RunAsUser
	}
	if assert.NotNil(t, uid, "%s: weft-init runs as a given user", name) {
		assert.NotZero(t, *uid, "%s: weft-init runs as non-root", name)
	}
	if assert.NotNil(t, sc.RunAsNonRoot, "%s: weft-init runAsNonRoot", name) {
		assert.True(t, *sc.RunAsNonRoot)
	}
	require.NotNil(t, sc.Capabilities)
	assert.ElementsMatch(t, []corev1.Capability{"NET_ADMIN", "NET_RAW"}, sc.Capabilities.Add, "%s: weft-init capabilities", name)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	// weft-init ran to completion in the pod (its rules are in place).
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == vocab.InitContainerName {
			if assert.NotNil(t, cs.State.Terminated, "%s: weft-init finished", name) {
				assert.Equal(t, int32(0), cs.State.Terminated.ExitCode, "%s: weft-init: %s", name, cs.State.Terminated.Message)
			}
			assert.Contains(t, cs.ImageID, e.images["weft-init"].Config)
		}
		if cs.Name == vocab.ProxyContainerName {
			assert.Contains(t, cs.ImageID, e.images["weft-proxy"].Config)
			assert.Zero(t, cs.RestartCount, "%s: the proxy never restarted", name)
		}
	}
	var token bool
	for _, v := range p.Spec.Volumes {
		if v.Name == vocab.TokenVolumeName && v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience != "" {
					token = true
				}
			}
		}
	}
	assert.True(t, token, "%s: a projected service-account token with an audience", name)
}

func (m *mesh) meshed(t *testing.T) {
	e := m.e
	client, intruder, frontend, backend := m.pods["client"], m.pods["intruder"], m.pods["frontend"], m.pods["backend"]
	marker := "weft-http-secret-" + randomSuffix() + randomSuffix()
	tcpMarker := "weft-tcp-secret-" + randomSuffix() + randomSuffix()
	control := "weft-plaintext-control-" + randomSuffix() + randomSuffix()
	frontendURL := fmt.Sprintf("http://frontend:%d/", httpPort)
	backendURL := fmt.Sprintf("http://backend:%d/", httpPort)
	backendEcho := fmt.Sprintf("backend:%d", tcpPort)

	capt := e.startCapture(t)
	c := e.call(t, client, frontendURL, marker, 50)
	require.Zero(t, c.Failed, "client -> frontend -> backend: %+v", c)
	assert.Equal(t, "frontend "+marker+" -> backend "+marker, c.Last)
	ctx := timeout(t, time.Minute)
	reply, errText, err := e.tcpExchange(ctx, client, backendEcho, tcpMarker)
	require.NoError(t, err)
	require.Empty(t, errText, "client -> backend TCP")
	assert.Equal(t, "backend "+tcpMarker, reply)
	c = e.call(t, intruder, backendURL, marker, 5)
	require.Zero(t, c.Failed, "before any policy the intruder gets in: %+v", c)
	// The control: a meshed pod calling an unmeshed one speaks plaintext,
	// and the capture must see it.
	c = e.call(t, intruder, fmt.Sprintf("http://plain.%s:%d/", m.plain, httpPort), control, 3)
	require.Zero(t, c.Failed, "intruder -> plain: %+v", c)

	streams := capt.streams(t)
	plainPod := e.onePod(t, m.plain, "plain")
	var meshedFlows, sawControl int
	for f, b := range streams {
		assert.False(t, bytes.Contains(b, []byte(marker)), "HTTP marker in plaintext between pods: %s", describe(f, b))
		assert.False(t, bytes.Contains(b, []byte(tcpMarker)), "TCP marker in plaintext between pods: %s", describe(f, b))
		if bytes.Contains(b, []byte(control)) {
			sawControl++
		}
		port := f.dst.Port()
		if (port == httpPort || port == tcpPort) && f.dst.Addr().String() != plainPod.Status.PodIP {
			meshedFlows++
			assert.True(t, isTLSRecord(b), "a connection to an application port between meshed pods is TLS: %s", describe(f, b))
		}
	}
	assert.NotZero(t, sawControl, "the capture saw the plaintext control call (so it would see plaintext between meshed pods)")
	assert.GreaterOrEqual(t, meshedFlows, 3, "connections between meshed pods on application ports (client->frontend, frontend->backend, client->backend echo)")

	// Every hop is mutual TLS with verified identities, by the proxies'
	// own metrics.
	id := func(name string) string { return identityOf(name, m.app) }
	for _, hop := range []struct {
		pod                 corev1.Pod
		metric, dir, peerID string
	}{
		{frontend, "request_total", "inbound", id("client")},
		{backend, "request_total", "inbound", id("frontend")},
		{backend, "request_total", "inbound", id("intruder")},
		{client, "request_total", "outbound", id("frontend")},
		{frontend, "request_total", "outbound", id("backend")},
		{backend, "tcp_open_total", "inbound", id("client")},
		{client, "tcp_open_total", "outbound", id("backend")},
	} {
		eventually(t, 30*time.Second, fmt.Sprintf("%s %s %s from %s over mTLS", hop.pod.Name, hop.metric, hop.dir, hop.peerID), func(ctx context.Context) error {
			ms, err := e.proxyMetrics(ctx, hop.pod)
			if err != nil {
				return err
			}
			if sum(ms, hop.metric, meshedFrom(hop.dir, hop.peerID)) == 0 {
				return fmt.Errorf("none; seen: %s", peers(ms, hop.metric, hop.dir))
			}
			return nil
		})
	}

}

// policyEnforced applies a policy that admits only frontend to backend's
// HTTP port and only client to its echo port: the intruder is denied, the
// admitted callers still get in; deleting the policy lets the intruder in
// within seconds, with no restart.
func (m *mesh) policyEnforced(t *testing.T) {
	e := m.e
	client, intruder := m.pods["client"], m.pods["intruder"]
	marker := "weft-http-secret-" + randomSuffix() + randomSuffix()
	frontendURL := fmt.Sprintf("http://frontend:%d/", httpPort)
	backendURL := fmt.Sprintf("http://backend:%d/", httpPort)
	backendEcho := fmt.Sprintf("backend:%d", tcpPort)

	// Whatever fails below, the policy does not outlive this step.
	t.Cleanup(func() { m.deletePolicy(t) })
	m.applyPolicy(t)
	// The six objects reach the controller one by one: between a Server
	// and its AuthorizationPolicy every caller is denied. So the step
	// waits for the whole policy to be in force (the intruder denied
	// and the admitted caller let in, on each port) before it counts.
	eventually(t, time.Minute, "the intruder denied with 403 and the frontend admitted", func(ctx context.Context) error {
		if c := e.call(t, intruder, backendURL, marker, 3); c.Codes["403"] != 3 {
			return fmt.Errorf("intruder -> backend: %+v", c)
		}
		if c := e.call(t, client, frontendURL, marker, 3); c.OK != 3 {
			return fmt.Errorf("client -> frontend -> backend: %+v", c)
		}
		return nil
	})
	eventually(t, time.Minute, "the intruder's TCP connection refused and the client's admitted", func(ctx context.Context) error {
		reply, errText, err := e.tcpExchange(ctx, intruder, backendEcho, "let me in")
		if err != nil {
			return err
		}
		if errText == "" {
			return fmt.Errorf("intruder got a reply %q", reply)
		}
		reply, errText, err = e.tcpExchange(ctx, client, backendEcho, "admitted")
		if err != nil {
			return err
		}
		if errText != "" || reply != "backend admitted" {
			return fmt.Errorf("client: reply %q, error %q", reply, errText)
		}
		return nil
	})
	// In force, it holds: every admitted call gets through.
	c := e.call(t, client, frontendURL, marker, 20)
	assert.Zero(t, c.Failed, "client -> frontend -> backend under the policy: %+v", c)
	reply, errText, err := e.tcpExchange(timeout(t, time.Minute), client, backendEcho, "allowed")
	require.NoError(t, err)
	assert.Empty(t, errText, "client -> backend echo under the policy")
	assert.Equal(t, "backend allowed", reply)
	c = e.call(t, intruder, backendURL, marker, 5)
	assert.Equal(t, 5, c.Codes["403"], "intruder -> backend under the policy: %+v", c)

	// Deleting the policy lets the intruder in again, within seconds and
	// without restarting anything.
	m.deletePolicy(t)
	deleted := time.Now()
	eventually(t, 30*time.Second, "the intruder let in after the policy is deleted", func(ctx context.Context) error {
		c := e.call(t, intruder, backendURL, marker, 1)
		if c.OK != 1 {
			return fmt.Errorf("%+v", c)
		}
		reply, errText, err := e.tcpExchange(ctx, intruder, backendEcho, "in")
		if err != nil || errText != "" {
			return fmt.Errorf("TCP: %v %s", err, errText)
		}
		if reply != "backend in" {
			return fmt.Errorf("TCP reply %q", reply)
		}
		return nil
	})
	t.Logf("the intruder was let in %s after the policy was deleted", time.Since(deleted).Round(100*time.Millisecond))
	m.assertNoRestarts(t)
}

// assertNoRestarts checks that the application's pods of step 2 are the
// same pods, never restarted.
func (m *mesh) assertNoRestarts(t *testing.T) {
	t.Helper()
	for name, before := range m.pods {
		now, err := m.e.kube.CoreV1().Pods(m.app).Get(timeout(t, time.Minute), before.Name, metav1.GetOptions{})
		require.NoError(t, err, "%s's pod is still there", name)
		assert.Equal(t, before.UID, now.UID)
		for _, cs := range append(now.Status.InitContainerStatuses, now.Status.ContainerStatuses...) {
			assert.Zero(t, cs.RestartCount, "%s/%s restarted", name, cs.Name)
		}
	}
}
