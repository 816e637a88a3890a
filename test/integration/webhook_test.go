//go:build kubeintegration

package integration_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/testutil"
	discoverykube "github.com/weftmesh/weft/mesh/discovery/kubernetes"
	"github.com/weftmesh/weft/mesh/inject"
	injectkube "github.com/weftmesh/weft/mesh/inject/kubernetes"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// webhookLabel scopes the test webhook configurations to namespaces that
// carry it with the configuration's id, so they never touch the other
// tests' objects.
const webhookLabel = "weft.test/webhooks"

// webhooks is Weft's injector and validator served over HTTPS on loopback
// and registered with the API server.
type webhooks struct {
	id string
	// calls records the namespace of every AdmissionReview the API server
	// sent to each path.
	mu    sync.Mutex
	calls map[string][]string
}

func (w *webhooks) called(path, ns string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.calls[path], ns)
}

// serveWebhooks starts the injector (/inject) and validator (/validate)
// behind a TLS listener on 127.0.0.1 with a certificate for that address,
// and registers them with the API server the way `weft install` would
// (Linkerd's namespaceSelector, failurePolicy Fail, sideEffects None), by
// URL with the CA bundle set. It returns once the API server calls them.
func serveWebhooks(t *testing.T, c clients) *webhooks {
	t.Helper()
	ctx := timeout(t, time.Minute)

	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "webhook test CA"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: "weft-webhooks", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})

	values := inject.DefaultValues()
	values.IdentityTrustAnchorsPEM = string(testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test"}).CertPEM)
	require.NoError(t, values.Validate())
	nss, err := injectkube.NewNamespaces(ctx, c.kube)
	require.NoError(t, err)
	t.Cleanup(func() { _ = nss.Close() })
	injector, err := webhook.NewInjector(values, nss)
	require.NoError(t, err)
	validator, err := webhook.NewValidator()
	require.NoError(t, err)

	w := &webhooks{id: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), calls: map[string][]string{}}
	if len(w.id) > 40 {
		w.id = w.id[:40]
	}
	w.id = strings.Trim(w.id, "-_.")
	record := func(path string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, webhook.MaxBodyBytes+1))
			if err == nil {
				if review, err := webhook.DecodeReview(body); err == nil {
					w.mu.Lock()
					w.calls[path] = append(w.calls[path], review.Request.Namespace)
					w.mu.Unlock()
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(rw, r)
		})
	}
	mux := http.NewServeMux()
	mux.Handle("/inject", record("/inject", injector))
	mux.Handle("/validate", record("/validate", validator))
	srv := &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
	}
	l := testutil.Listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() {
		sctx := timeout(t, 10*time.Second)
		_ = srv.Shutdown(sctx)
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("webhook server: %v", err)
		}
	})
	base := "https://" + l.Addr().String()

	selector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: vocab.LabelAdmissionWebhooks, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}},
		{Key: webhookLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{w.id}},
	}}
	mwc := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "weft-proxy-injector-" + w.id},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "proxy-injector.weft.test",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: ptr.To(base + "/inject"), CABundle: anchor.CertPEM},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       selector,
			FailurePolicy:           ptr.To(admissionregv1.Fail),
			SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
			ReinvocationPolicy:      ptr.To(admissionregv1.IfNeededReinvocationPolicy),
		}},
	}
	_, err = c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(timeout(t, 10*time.Second), mwc.Name, metav1.DeleteOptions{})
	})
	vwc := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "weft-validator-" + w.id},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         "validator.weft.test",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: ptr.To(base + "/validate"), CABundle: anchor.CertPEM},
			Rules: []admissionregv1.RuleWithOperations{{
				Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update},
				Rule:       admissionregv1.Rule{APIGroups: []string{"linkerd.io", "policy.linkerd.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}},
			NamespaceSelector:       selector,
			FailurePolicy:           ptr.To(admissionregv1.Fail),
			SideEffects:             ptr.To(admissionregv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	_, err = c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(timeout(t, 10*time.Second), vwc.Name, metav1.DeleteOptions{})
	})

	// The API server picks webhook configurations up from its own
	// informer: wait until a dry-run pod in a probe namespace is injected
	// and a dry-run ServiceProfile reaches the validator.
	probe := newNamespace(t, c, "probe", map[string]string{webhookLabel: w.id}, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled})
	began := time.Now()
	testutil.Eventually(t, 20*time.Second, func() bool {
		pod, err := c.kube.CoreV1().Pods(probe).Create(ctx, appPod("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && hasProxy(pod)
	}, "the API server to call the injector")
	testutil.Eventually(t, 20*time.Second, func() bool {
		_, err := c.dyn.Resource(discoverykube.ServiceProfileResource).Namespace(probe).Create(ctx, serviceProfile(t, probe, validProfile), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && w.called("/validate", probe)
	}, "the API server to call the validator")
	t.Logf("webhook configurations took effect in %s", time.Since(began).Round(time.Millisecond))
	return w
}

func appPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}, Annotations: map[string]string{"example.com/owner": "team-a"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "example.com/app:1",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

// proxyContainer returns the weft-proxy container of pod, native sidecar
// or classic.
func proxyContainer(pod *corev1.Pod) (corev1.Container, bool) {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == vocab.ProxyContainerName {
				return c, true
			}
		}
	}
	return corev1.Container{}, false
}

func hasProxy(pod *corev1.Pod) bool {
	_, ok := proxyContainer(pod)
	return ok
}

const validProfile = `
spec:
  routes:
  - name: GET /books/{id}
    condition: {method: GET, pathRegex: '/books/\d+'}
    isRetryable: true
    timeout: 300ms`

func serviceProfile(t *testing.T, ns, specYAML string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(specYAML), &u.Object))
	u.SetAPIVersion("linkerd.io/v1alpha2")
	u.SetKind("ServiceProfile")
	u.SetNamespace(ns)
	u.SetName("books." + ns + ".svc.cluster.local")
	return u
}

func TestAPIServerCallsWeftsAdmissionWebhooks(t *testing.T) {
	c := cluster(t)
	requireCRDs(t, c)
	w := serveWebhooks(t, c)

	t.Run("a pod created in an injected namespace is stored with the proxy", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		ns := newNamespace(t, c, "injected", map[string]string{webhookLabel: w.id}, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled})
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, appPod("web"), metav1.CreateOptions{})
		require.NoError(t, err)
		stored, err := c.kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)

		proxy, ok := proxyContainer(stored)
		require.True(t, ok, "stored pod has no %s container: init=%v containers=%v", vocab.ProxyContainerName, names(stored.Spec.InitContainers), names(stored.Spec.Containers))
		assert.True(t, w.called("/inject", ns), "the API server called the injector for this namespace")
		assert.Equal(t, defaultValues().ProxyImage(), proxy.Image)
		assert.Equal(t, "weft", stored.Labels[vocab.LabelControlPlaneNamespace], "the meshed-pod label")
		assert.Equal(t, "web", stored.Labels["app"], "the pod's own labels are kept")
		assert.Contains(t, names(stored.Spec.Containers), "app", "the application container is kept")
		// The proxy gets a token for identity.l5d.io through a projected
		// volume the API server accepted.
		assert.True(t, projectsIdentityToken(stored), "no projected service-account token for %s", vocab.IdentityTokenAudience)
		// The ServiceAccount admission plugin ran before the webhook and
		// its token volume survived the patch.
		assert.Equal(t, "default", stored.Spec.ServiceAccountName)
		assert.True(t, slices.ContainsFunc(stored.Spec.Volumes, func(v corev1.Volume) bool { return strings.HasPrefix(v.Name, "kube-api-access-") }),
			"the ServiceAccount plugin's token volume is kept")
		t.Logf("stored pod: init containers %v, containers %v", names(stored.Spec.InitContainers), names(stored.Spec.Containers))
	})

	t.Run("a pod in a namespace with admission webhooks disabled is stored untouched without calling the injector", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		ns := newNamespace(t, c, "opted-out", map[string]string{webhookLabel: w.id, vocab.LabelAdmissionWebhooks: "disabled"},
			map[string]string{vocab.AnnotationInject: vocab.InjectEnabled})
		sent := appPod("web")
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, sent, metav1.CreateOptions{})
		require.NoError(t, err)
		stored, err := c.kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assertUntouched(t, sent, stored)
		assert.False(t, w.called("/inject", ns), "the namespaceSelector kept the API server from calling the injector")
	})

	t.Run("a pod in a namespace with injection disabled is stored untouched", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		ns := newNamespace(t, c, "disabled", map[string]string{webhookLabel: w.id}, map[string]string{vocab.AnnotationInject: vocab.InjectDisabled})
		sent := appPod("web")
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, sent, metav1.CreateOptions{})
		require.NoError(t, err)
		stored, err := c.kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		assertUntouched(t, sent, stored)
		assert.True(t, w.called("/inject", ns), "the injector was asked and declined")
	})

	t.Run("an invalid pod annotation is refused by the API server with the injector's message", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		ns := newNamespace(t, c, "bad-annotation", map[string]string{webhookLabel: w.id}, map[string]string{vocab.AnnotationInject: vocab.InjectEnabled})
		pod := appPod("web")
		pod.Annotations["config.linkerd.io/proxy-cpu-request"] = "lots"
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		require.Error(t, err)
		t.Logf("the API server said: %v", err)
		assert.Contains(t, err.Error(), `admission webhook "proxy-injector.weft.test" denied the request`)
		assert.Contains(t, err.Error(), `config.linkerd.io/proxy-cpu-request="lots"`)
		_, err = c.kube.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
	})

	t.Run("an invalid ServiceProfile is refused by the API server with the validator's field message", func(t *testing.T) {
		ctx := timeout(t, 30*time.Second)
		ns := newNamespace(t, c, "profiles", map[string]string{webhookLabel: w.id}, nil)
		profiles := c.dyn.Resource(discoverykube.ServiceProfileResource).Namespace(ns)

		// The CRD schema accepts this (pathRegex is a string); only the
		// validator knows it is not a regular expression.
		bad := serviceProfile(t, ns, `
spec:
  routes:
  - name: GET /books/{id}
    condition: {method: GET, pathRegex: '/books/(\d+'}`)
		_, err := profiles.Create(ctx, bad, metav1.CreateOptions{})
		require.Error(t, err, "the API server stored an invalid ServiceProfile")
		t.Logf("the API server said: %v", err)
		assert.Contains(t, err.Error(), `admission webhook "validator.weft.test" denied the request`)
		assert.Contains(t, err.Error(), "spec.routes[0].condition.pathRegex")
		assert.Contains(t, err.Error(), "not a valid regular expression")
		_, err = profiles.Get(ctx, bad.GetName(), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)

		// Without the webhook the same object is accepted: the refusal
		// above is the validator's, not the schema's.
		plain := newNamespace(t, c, "profiles-unvalidated", nil, nil)
		unchecked := serviceProfile(t, plain, `
spec:
  routes:
  - name: GET /books/{id}
    condition: {method: GET, pathRegex: '/books/(\d+'}`)
		_, err = c.dyn.Resource(discoverykube.ServiceProfileResource).Namespace(plain).Create(ctx, unchecked, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.NoError(t, err)

		// A valid profile goes through the validator and is stored.
		_, err = profiles.Create(ctx, serviceProfile(t, ns, validProfile), metav1.CreateOptions{})
		assert.NoError(t, err)
		assert.True(t, w.called("/validate", ns))
	})
}

func defaultValues() *inject.Values {
	v := inject.DefaultValues()
	return &v
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func projectsIdentityToken(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.Audience == vocab.IdentityTokenAudience {
				return true
			}
		}
	}
	return false
}

// assertUntouched checks that the stored pod has what was sent and nothing
// from the injector: same containers, no init containers, same labels and
// annotations, and no volume beyond the service-account token the
// ServiceAccount admission plugin adds to every pod.
func assertUntouched(t *testing.T, sent, stored *corev1.Pod) {
	t.Helper()
	assert.False(t, hasProxy(stored), "the pod was injected")
	assert.Equal(t, names(sent.Spec.Containers), names(stored.Spec.Containers))
	assert.Empty(t, stored.Spec.InitContainers)
	assert.Equal(t, sent.Labels, stored.Labels)
	assert.Equal(t, sent.Annotations, stored.Annotations)
	assert.False(t, projectsIdentityToken(stored), "an identity token volume was added")
	for _, v := range stored.Spec.Volumes {
		assert.True(t, strings.HasPrefix(v.Name, "kube-api-access-"), "unexpected volume %s", v.Name)
	}
}
