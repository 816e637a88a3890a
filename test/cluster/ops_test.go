//go:build clusterintegration

package cluster_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/install"
)

const cpNS = vocab.DefaultControlPlaneNamespace

// result logs one failure count in a form docs/benchmarks.md quotes.
func result(t *testing.T, what string, c counts) {
	t.Helper()
	t.Logf("RESULT %-45s requests %5d  failed %3d  codes %v  errors %v", what, c.OK+c.Failed, c.Failed, c.Codes, c.Errors)
}

// restartControllers rolls each control-plane Deployment (kubectl rollout
// restart) while the client calls frontend -> backend, counting failures.
func (m *mesh) restartControllers(t *testing.T) {
	e := m.e
	client := m.pods["client"]
	target := fmt.Sprintf("http://frontend:%d/", httpPort)
	for _, comp := range install.Components() {
		l := e.startLoad(t, client, target, "rollout")
		var probe *injectionProbe
		if comp.Deployment == "weft-proxy-injector" {
			probe = m.startInjectionProbe(t)
		}
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
		_, err := e.kube.AppsV1().Deployments(cpNS).Patch(timeout(t, time.Minute), comp.Deployment, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, 5*time.Minute, comp.Deployment+" rolled out again", func(ctx context.Context) error {
			return e.rolledOut(ctx, cpNS, comp.Deployment)
		})
		if probe != nil {
			// The old injector serves on through its shutdown delay: probe
			// until it is gone, so the whole hand-over is covered.
			eventually(t, 2*time.Minute, "the old injector pod gone", func(ctx context.Context) error {
				pods, err := e.kube.CoreV1().Pods(cpNS).List(ctx, metav1.ListOptions{LabelSelector: install.LabelComponent + "=proxy-injector"})
				if err != nil {
					return err
				}
				if n := len(pods.Items); n != 1 {
					return fmt.Errorf("%d injector pods", n)
				}
				return nil
			})
			injected, missed := probe.stop()
			t.Logf("RESULT pods created (dry run) during the injector's rollout: %d, injected %d", injected+len(missed), injected)
			assert.NotZero(t, injected, "pods were created during the injector's rollout")
			assert.Empty(t, missed, "pods admitted without a proxy while the injector rolled; the API server said: %s", e.apiServerLog("failing open"))
		}
		c := l.stop(t)
		result(t, "rolling restart of "+comp.Deployment, c)
		assert.NotZero(t, c.OK, "calls were made during the rollout")
		assert.Zero(t, c.Failed, "failed calls during the rollout of %s: %v", comp.Deployment, c.Errors)
	}
	m.assertNoRestarts(t)
}

// apiServerLog returns the API server's log lines that contain what (the
// last 20), to say why a call it made failed.
func (e *env) apiServerLog(what string) string {
	data, err := os.ReadFile(filepath.Join(e.state.Dir, "logs", "kube-apiserver.log"))
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, what) {
			lines = append(lines, l)
		}
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// injectionProbe creates pods with dry run, one every 100 ms, and records
// whether each was injected: the mutating webhook runs on dry-run
// creates (its sideEffects are None), so this sees what a Deployment
// scaling up at that moment would get.
type injectionProbe struct {
	cancel   context.CancelFunc
	done     chan struct{}
	injected int
	missed   []string
}

func (m *mesh) startInjectionProbe(t *testing.T) *injectionProbe {
	e := m.e
	ctx, cancel := context.WithCancel(timeout(t, 10*time.Minute))
	p := &injectionProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Labels: map[string]string{"app": "probe"}}, Spec: e.appPodSpec("client", nil)}
			created, err := e.kube.CoreV1().Pods(m.app).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				p.missed = append(p.missed, fmt.Sprintf("%s: %v", pod.Name, err))
			case !hasProxy(created):
				p.missed = append(p.missed, pod.Name+": admitted without a proxy")
			default:
				p.injected++
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return p
}

// stop ends the probe and returns what it saw.
func (p *injectionProbe) stop() (injected int, missed []string) {
	p.cancel()
	<-p.done
	return p.injected, p.missed
}

// hasProxy reports whether pod carries Weft's proxy container.
func hasProxy(pod *corev1.Pod) bool {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == vocab.ProxyContainerName {
			return true
		}
	}
	return false
}

// scale takes backend from 1 to 5 replicas and back while the client
// calls it through frontend, counting failures; every new replica must
// receive calls (discovery follows).
func (m *mesh) scale(t *testing.T) {
	e := m.e
	client := m.pods["client"]
	target := fmt.Sprintf("http://frontend:%d/", httpPort)
	setReplicas := func(n int32) {
		_, err := e.kube.AppsV1().Deployments(m.app).Patch(timeout(t, time.Minute), "backend", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, 5*time.Minute, fmt.Sprintf("backend at %d replicas", n), func(ctx context.Context) error {
			if err := e.rolledOut(ctx, m.app, "backend"); err != nil {
				return err
			}
			pods, err := e.podsOf(ctx, m.app, "backend")
			if err != nil {
				return err
			}
			if len(pods) != int(n) {
				return fmt.Errorf("%d backend pods running", len(pods))
			}
			return nil
		})
	}
	l := e.startLoad(t, client, target, "scale")
	setReplicas(5)
	pods, err := e.podsOf(timeout(t, time.Minute), m.app, "backend")
	require.NoError(t, err)
	for _, p := range pods {
		require.True(t, hasProxy(&p), "backend pod %s was admitted without a proxy", p.Name)
	}
	for _, p := range pods {
		eventually(t, time.Minute, "backend pod "+p.Name+" receives calls", func(ctx context.Context) error {
			ms, err := e.proxyMetrics(ctx, p)
			if err != nil {
				return err
			}
			if sum(ms, "request_total", meshedFrom("inbound", identityOf("frontend", m.app))) == 0 {
				return errors.New("no inbound request from frontend yet")
			}
			return nil
		})
	}
	setReplicas(1)
	c := l.stop(t)
	result(t, "backend scaled 1 -> 5 -> 1", c)
	assert.NotZero(t, c.OK)
	assert.Zero(t, c.Failed, "failed calls while scaling: %v", c.Errors)
}

// rotateIssuer makes a new issuer under the same anchor with `weft certs`,
// puts it in the issuer Secret, and waits until every proxy presents a leaf
// from it, with no pod restarted and calls still flowing.
func (m *mesh) rotateIssuer(t *testing.T) {
	e := m.e
	out := filepath.Join(m.dir, "issuer2")
	code, stdout, errs := e.weftCmd(t, nil, "certs", "create-issuer", "--anchor", m.certs, "--out", out)
	require.Equal(t, 0, code, "%s %s", stdout, errs)
	crt, err := os.ReadFile(filepath.Join(out, "crt.pem"))
	require.NoError(t, err)
	key, err := os.ReadFile(filepath.Join(out, "key.pem"))
	require.NoError(t, err)
	newIssuer, err := certpem.ParseCertificates(crt)
	require.NoError(t, err)
	ctx := timeout(t, time.Minute)
	sec, err := e.kube.CoreV1().Secrets(cpNS).Get(ctx, install.SecretIssuer, metav1.GetOptions{})
	require.NoError(t, err)
	oldIssuer, err := certpem.ParseCertificates(sec.Data[corev1.TLSCertKey])
	require.NoError(t, err)
	require.False(t, bytes.Equal(oldIssuer[0].Raw, newIssuer[0].Raw))
	sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey] = crt, key
	_, err = e.kube.CoreV1().Secrets(cpNS).Update(ctx, sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	rotated := time.Now()

	l := e.startLoad(t, m.pods["client"], fmt.Sprintf("http://frontend:%d/", httpPort), "rotation")
	pods := map[string]corev1.Pod{}
	for _, app := range []string{"client", "frontend", "intruder"} {
		pods[app] = m.pods[app]
	}
	pods["backend"] = e.onePod(t, m.app, "backend")
	// The kubelet refreshes the mounted Secret within its sync period, the
	// identity service reloads it, and each proxy renews at 70% of its 2m
	// leaf: every leaf is from the new issuer within a few minutes.
	for name, p := range pods {
		eventually(t, 6*time.Minute, name+"'s leaf issued by the new issuer", func(context.Context) error {
			chain := e.peerChain(t, p, identityOf(name, m.app))
			if err := chain[0].CheckSignatureFrom(newIssuer[0]); err != nil {
				return fmt.Errorf("leaf issued by %q, not yet the new issuer: %w", chain[0].Issuer, err)
			}
			roots := x509.NewCertPool()
			anchors, err := os.ReadFile(filepath.Join(m.certs, "ca.crt"))
			if err != nil {
				return err
			}
			roots.AppendCertsFromPEM(anchors)
			inter := x509.NewCertPool()
			for _, c := range chain[1:] {
				inter.AddCert(c)
			}
			_, err = chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			return err
		})
	}
	t.Logf("every proxy presents a leaf of the new issuer %s after the Secret changed", time.Since(rotated).Round(time.Second))
	// Later renders of the install carry the new issuer.
	for i, a := range m.pinned {
		if a == "--identity-issuer-dir" {
			m.pinned[i+1] = out
		}
	}
	c := l.stop(t)
	result(t, "issuer rotation", c)
	assert.Zero(t, c.Failed, "failed calls during the rotation: %v", c.Errors)
	m.assertNoRestarts(t)
}

// injectorDown deletes the injector: with failurePolicy Ignore (the
// default) a pod created meanwhile starts without a proxy; with --ha's
// Fail it is refused. Re-applying the install brings the injector back.
func (m *mesh) injectorDown(t *testing.T) {
	e := m.e
	ctx := timeout(t, 5*time.Minute)
	require.NoError(t, e.kube.AppsV1().Deployments(cpNS).Delete(ctx, "weft-proxy-injector", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationForeground)}))
	eventually(t, 2*time.Minute, "the injector's pods gone", func(ctx context.Context) error {
		pods, err := e.kube.CoreV1().Pods(cpNS).List(ctx, metav1.ListOptions{LabelSelector: install.LabelComponent + "=proxy-injector"})
		if err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: e.appPodSpec("client", nil)}
	}
	created, err := e.kube.CoreV1().Pods(m.app).Create(ctx, pod("while-injector-down"), metav1.CreateOptions{})
	require.NoError(t, err, "failurePolicy Ignore: the pod is admitted")
	assert.Empty(t, created.Spec.InitContainers, "failurePolicy Ignore: the pod starts without a proxy")
	require.NoError(t, e.kube.CoreV1().Pods(m.app).Delete(ctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))

	// The --ha webhooks (failurePolicy Fail), same certificates.
	code, ha, errs := e.weftCmd(t, nil, append([]string{"install", "--ha"}, m.pinned...)...)
	require.Equal(t, 0, code, errs)
	objs, err := install.Decode(ha)
	require.NoError(t, err)
	var hooks []runtime.Object
	for _, o := range objs {
		if mw, ok := o.(*admissionregv1.MutatingWebhookConfiguration); ok {
			for _, w := range mw.Webhooks {
				require.Equal(t, admissionregv1.Fail, *w.FailurePolicy)
			}
			hooks = append(hooks, mw)
		}
	}
	require.Len(t, hooks, 1)
	e.applyObjects(t, hooks)
	eventually(t, time.Minute, "a pod refused while the injector is down under --ha", func(ctx context.Context) error {
		p, err := e.kube.CoreV1().Pods(m.app).Create(ctx, pod("refused-while-injector-down"), metav1.CreateOptions{})
		if err == nil {
			_ = e.kube.CoreV1().Pods(m.app).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
			return errors.New("the pod was admitted")
		}
		if !strings.Contains(err.Error(), "webhook") {
			return fmt.Errorf("refused, but not by the webhook: %w", err)
		}
		t.Logf("refused as expected: %v", err)
		return nil
	})

	// Back to the install of step 1: the injector returns and injects.
	code, manifest, errs := e.weftCmd(t, nil, append([]string{"install"}, m.pinned...)...)
	require.Equal(t, 0, code, errs)
	e.applyManifest(t, manifest)
	eventually(t, 5*time.Minute, "the injector back", func(ctx context.Context) error { return e.rolledOut(ctx, cpNS, "weft-proxy-injector") })
	eventually(t, 2*time.Minute, "a new pod injected again", func(ctx context.Context) error {
		p, err := e.kube.CoreV1().Pods(m.app).Create(ctx, pod("after-injector-back-"+randomSuffix()), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		defer e.kube.CoreV1().Pods(m.app).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}) //nolint:errcheck
		if hasProxy(p) {
			return nil
		}
		return errors.New("created without a proxy")
	})
}

// uninstall runs `weft uninstall | kubectl delete --wait -f -` (the
// cluster's kubectl) and asks the API server for every kind the install
// created: none of its objects may be left.
func (m *mesh) uninstall(t *testing.T) {
	e := m.e
	code, manifest, errs := e.weftCmd(t, nil, append([]string{"install"}, m.pinned...)...)
	require.Equal(t, 0, code, errs)
	objs, err := install.Decode(manifest)
	require.NoError(t, err)

	code, out, errs := e.weftCmd(t, nil, "uninstall", "--values", filepath.Join(m.dir, "values.yaml"))
	require.Equal(t, 0, code, "%s %s", out, errs)
	t.Logf("weft uninstall:\n%s\nits report:\n%s", out, errs)
	ctx := timeout(t, 5*time.Minute)
	kubectl := exec.CommandContext(ctx, filepath.Join(e.state.BinDir, "kubectl"), "delete", "--wait", "--timeout", "4m", "-f", "-")
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+e.state.Kubeconfig)
	kubectl.Stdin = bytes.NewReader(out)
	deleted, err := kubectl.CombinedOutput()
	t.Logf("kubectl delete -f -:\n%s", deleted)
	require.NoError(t, err, "weft uninstall | kubectl delete -f -")

	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind()
		eventually(t, 3*time.Minute, fmt.Sprintf("%s %s gone", kind.Kind, o.GetName()), func(ctx context.Context) error {
			err := e.getObject(ctx, o)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				return errors.New("still there")
			}
			return err
		})
	}
	// Nothing labelled as Weft's is left anywhere either.
	ws, err := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, w := range ws.Items {
		assert.NotContains(t, w.Name, "weft", "webhook configuration left")
	}
	crs, err := e.kube.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, r := range crs.Items {
		assert.False(t, strings.HasPrefix(r.Name, "weft-"), "cluster role %s left", r.Name)
	}
	crds, err := e.apiext.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range crds.Items {
		assert.False(t, strings.HasSuffix(c.Name, ".linkerd.io"), "CRD %s left", c.Name)
	}
}

// getObject reads o back from the API server.
func (e *env) getObject(ctx context.Context, o install.Object) error {
	gvk := o.GetObjectKind().GroupVersionKind()
	name, ns := o.GetName(), o.GetNamespace()
	var err error
	switch gvk.Kind {
	case "Namespace":
		_, err = e.kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	case "CustomResourceDefinition":
		_, err = e.apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	case "ClusterRole":
		_, err = e.kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	case "ClusterRoleBinding":
		_, err = e.kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	case "MutatingWebhookConfiguration":
		_, err = e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	case "ValidatingWebhookConfiguration":
		_, err = e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	case "ServiceAccount":
		_, err = e.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	case "ConfigMap":
		_, err = e.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	case "Secret":
		_, err = e.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	case "Service":
		_, err = e.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	case "Deployment":
		_, err = e.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	case "PodDisruptionBudget":
		_, err = e.kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
	case "Role":
		_, err = e.kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
	case "RoleBinding":
		_, err = e.kube.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	case "APIService":
		err = e.kube.Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices", name).Do(ctx).Error()
	default:
		return fmt.Errorf("the test does not know how to read a %s", gvk.Kind)
	}
	return err
}
