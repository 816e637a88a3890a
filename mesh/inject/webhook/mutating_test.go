package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

func newInjector(t testing.TB, nss inject.NamespaceLookup, opts ...webhook.Option) (*webhook.Injector, string, *http.Client) {
	t.Helper()
	h, err := webhook.NewInjector(testValues(t), nss, opts...)
	require.NoError(t, err)
	url, client := serveTLS(t, h)
	return h, url, client
}

func TestInjectorInjectsAPodOverHTTPS(t *testing.T) {
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	_, url, client := newInjector(t, nss)
	pod := appPod("shop", map[string]string{vocab.AnnotationProxyCPURequest: "100m"})

	status, body := post(t, client, url, podReview(t, "3f2a", pod))
	require.Equal(t, http.StatusOK, status, string(body))
	resp := decodeResponse(t, body)
	assert.Equal(t, "3f2a", string(resp.UID))
	assert.True(t, resp.Allowed)
	assert.Equal(t, "true", resp.AuditAnnotations["injected"])
	out := applyResponse(t, pod, resp)
	assert.True(t, hasContainer(out, vocab.ProxyContainerName))
	assert.True(t, hasContainer(out, vocab.InitContainerName))
	assert.Equal(t, "weft", out.Labels[vocab.LabelControlPlaneNamespace])

	// The API server may call again (reinvocation): no second injection.
	status, body = post(t, client, url, podReview(t, "3f2b", out))
	require.Equal(t, http.StatusOK, status)
	again := decodeResponse(t, body)
	assert.True(t, again.Allowed)
	assert.Empty(t, again.Patch)
	assert.Equal(t, "already-injected", again.AuditAnnotations["reason"])
}

func TestInjectorAnswersMalformedRequestsWithHTTPErrors(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces())
	pod := appPod("shop", nil)
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	valid := func(mutate func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(podReview(t, "u1", pod), &m))
		mutate(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"malformed JSON", []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": `), 400, "malformed JSON"},
		{"not an object", []byte(`[1,2,3]`), 400, "malformed JSON"},
		{"trailing data", append(podReview(t, "u1", pod), []byte(`{}`)...), 400, "trailing data"},
		{"empty uid", valid(func(m map[string]any) { m["request"].(map[string]any)["uid"] = "" }), 400, "request.uid is empty"},
		{"missing uid", valid(func(m map[string]any) { delete(m["request"].(map[string]any), "uid") }), 400, "request.uid is empty"},
		{"missing request", valid(func(m map[string]any) { delete(m, "request") }), 400, "request is missing"},
		{"wrong version", valid(func(m map[string]any) { m["apiVersion"] = "admission.k8s.io/v1beta1" }), 400, `apiVersion "admission.k8s.io/v1beta1" is not supported`},
		{"wrong kind", valid(func(m map[string]any) { m["kind"] = "ConversionReview" }), 400, `kind "ConversionReview" is not AdmissionReview`},
		{"wrong type of field", valid(func(m map[string]any) { m["request"].(map[string]any)["operation"] = 7 }), 400, "malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, client, url, tc.body)
			assert.Equal(t, tc.status, status)
			assert.Contains(t, string(body), tc.want)
		})
	}
	_ = raw
}

func TestInjectorRefusesBodiesOverTheLimit(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces())
	// A real review whose pod carries an 11 MB annotation.
	pod := appPod("shop", map[string]string{"big": strings.Repeat("x", 11<<20)})
	status, body := post(t, client, url, podReview(t, "big", pod))
	assert.Equal(t, http.StatusRequestEntityTooLarge, status)
	assert.Contains(t, string(body), "limit")

	// Without a Content-Length (chunked), the limit still holds.
	req, err := http.NewRequest(http.MethodPost, url, struct{ *bytes.Reader }{bytes.NewReader(bytes.Repeat([]byte(" "), webhook.MaxBodyBytes+10))})
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func TestInjectorRefusesWrongMethodAndContentType(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces())
	resp, err := client.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	resp, err = client.Post(url, "text/plain", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
}

func TestInjectorAllowsOtherKindsOperationsAndSubresourcesUnchanged(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"})))
	pod := appPod("shop", nil)
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	svc := []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"}}`)
	for _, req := range []*admissionv1.AdmissionRequest{
		{UID: "a", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"}, Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: svc}},
		{UID: "b", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Update, Namespace: "shop", Object: runtime.RawExtension{Raw: raw}},
		{UID: "c", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create, SubResource: "ephemeralcontainers", Namespace: "shop", Object: runtime.RawExtension{Raw: raw}},
		{UID: "d", Kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create, Namespace: "shop", Object: runtime.RawExtension{Raw: raw}},
	} {
		status, body := post(t, client, url, review(t, req))
		require.Equal(t, http.StatusOK, status, string(body))
		resp := decodeResponse(t, body)
		assert.Equal(t, req.UID, resp.UID)
		assert.True(t, resp.Allowed, string(req.UID))
		assert.Nil(t, resp.Patch, string(req.UID))
		assert.Nil(t, resp.PatchType, string(req.UID))
	}
}

func TestInjectorDeniesPodsWithInvalidAnnotations(t *testing.T) {
	_, url, client := newInjector(t, inject.NewStaticNamespaces(namespace("shop", nil)))
	pod := appPod("shop", map[string]string{vocab.AnnotationInject: "enabled", vocab.AnnotationSkipInboundPorts: "9000-8000"})
	status, body := post(t, client, url, podReview(t, "bad", pod))
	require.Equal(t, http.StatusOK, status)
	resp := decodeResponse(t, body)
	assert.False(t, resp.Allowed)
	require.NotNil(t, resp.Result)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Contains(t, resp.Result.Message, `annotation config.linkerd.io/skip-inbound-ports="9000-8000"`)
	assert.Contains(t, resp.Result.Message, `pod "shop/web-7d9f8-*"`)
	assert.Nil(t, resp.Patch)
}

func TestInjectorLeavesOptedOutNamespacesAlone(t *testing.T) {
	ns := namespace("legacy", map[string]string{vocab.AnnotationInject: "enabled"})
	ns.Labels = map[string]string{vocab.LabelAdmissionWebhooks: "disabled"}
	_, url, client := newInjector(t, inject.NewStaticNamespaces(ns))
	status, body := post(t, client, url, podReview(t, "o", appPod("legacy", nil)))
	require.Equal(t, http.StatusOK, status)
	resp := decodeResponse(t, body)
	assert.True(t, resp.Allowed)
	assert.Nil(t, resp.Patch)
	assert.Equal(t, "false", resp.AuditAnnotations["injected"])
	assert.Equal(t, "namespace-opted-out", resp.AuditAnnotations["reason"])
}

type failingNamespaces struct{ panic bool }

func (f failingNamespaces) Namespace(context.Context, string) (*corev1.Namespace, error) {
	if f.panic {
		panic("lookup exploded")
	}
	return nil, errors.New("apiserver unavailable")
}

func TestInjectorAnswers500WhenTheNamespaceCannotBeRead(t *testing.T) {
	_, url, client := newInjector(t, failingNamespaces{})
	status, body := post(t, client, url, podReview(t, "x", appPod("shop", nil)))
	assert.Equal(t, http.StatusInternalServerError, status)
	assert.Contains(t, string(body), "apiserver unavailable")
}

func TestInjectorSurvivesAPanicBelowIt(t *testing.T) {
	_, url, client := newInjector(t, failingNamespaces{panic: true})
	for i := 0; i < 2; i++ {
		status, body := post(t, client, url, podReview(t, "p", appPod("shop", nil)))
		assert.Equal(t, http.StatusInternalServerError, status)
		assert.Contains(t, string(body), "internal error")
	}
}

func TestInjectorCountsRequestsByOutcome(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := webhook.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	_, url, client := newInjector(t, nss, webhook.WithMetrics(m))

	post(t, client, url, podReview(t, "1", appPod("shop", nil)))
	post(t, client, url, podReview(t, "2", appPod("shop", map[string]string{vocab.AnnotationInject: "disabled"})))
	post(t, client, url, []byte("{"))
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	observed := map[string]uint64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			outcome := m.GetLabel()[0].GetValue()
			if m.Counter != nil {
				counts[outcome] = m.GetCounter().GetValue()
			}
			if m.Histogram != nil {
				observed[outcome] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	assert.Equal(t, map[string]float64{"injected": 1, "skipped": 1, "bad_request": 1}, counts)
	assert.Equal(t, map[string]uint64{"injected": 1, "skipped": 1, "bad_request": 1}, observed)
}

func TestNewInjectorRequiresTrustAnchorsAndANamespaceLookup(t *testing.T) {
	_, err := webhook.NewInjector(inject.DefaultValues(), inject.NewStaticNamespaces())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "identityTrustAnchorsPEM")
	_, err = webhook.NewInjector(testValues(t), nil)
	require.Error(t, err)
}

// The same manifest rendered by `weft inject --manual` and by the webhook
// yields the same pod.
func TestInjectorAndCLIProduceTheSamePod(t *testing.T) {
	manifest := `apiVersion: v1
kind: Namespace
metadata:
  name: shop
  annotations:
    linkerd.io/inject: enabled
    config.linkerd.io/proxy-memory-limit: 250Mi
    config.linkerd.io/opaque-ports: "3306"
---
apiVersion: apps/v1
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
        config.linkerd.io/proxy-memory-request: 64Mi
        config.linkerd.io/proxy-cpu-limit: "1"
        config.linkerd.io/proxy-log-level: warn,linkerd=info
        config.beta.linkerd.io/proxy-enable-native-sidecar: "false"
    spec:
      serviceAccountName: web
      initContainers:
      - name: setup
        image: example.com/setup:1
      containers:
      - name: web
        image: example.com/web:1
        ports:
        - name: http
          containerPort: 8080
      volumes:
      - name: cache
        emptyDir: {}
`
	values := testValues(t)
	tr, err := inject.NewTransformer(values, inject.WithManual())
	require.NoError(t, err)
	var out bytes.Buffer
	_, err = tr.Transform(context.Background(), []inject.Input{{Name: "web.yaml", Data: []byte(manifest)}}, &out, nil)
	require.NoError(t, err)
	docs := strings.Split(out.String(), "\n---\n")
	require.Len(t, docs, 2)
	var dep appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &dep))
	cliPod := corev1.Pod{ObjectMeta: dep.Spec.Template.ObjectMeta, Spec: dep.Spec.Template.Spec}

	// The webhook sees a pod made from the original template.
	var orig appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict([]byte(strings.Split(manifest, "---\n")[1]), &orig))
	pod := &corev1.Pod{ObjectMeta: orig.Spec.Template.ObjectMeta, Spec: orig.Spec.Template.Spec}
	pod.Namespace = "shop"
	// As the Deployment controller makes it: owned by the ReplicaSet
	// "web-<pod-template-hash>", which names the Deployment.
	pod.Labels["pod-template-hash"] = "5c6d7f8b9"
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5c6d7f8b9", UID: "u1", Controller: ptrTo(true)}}
	var ns corev1.Namespace
	require.NoError(t, yaml.UnmarshalStrict([]byte(strings.Split(manifest, "---\n")[0]), &ns))
	h, err := webhook.NewInjector(values, inject.NewStaticNamespaces(&ns))
	require.NoError(t, err)
	url, client := serveTLS(t, h)
	status, body := post(t, client, url, podReview(t, "same", pod))
	require.Equal(t, http.StatusOK, status)
	webhookPod := applyResponse(t, pod, decodeResponse(t, body))

	assert.True(t, hasContainer(webhookPod, vocab.ProxyContainerName))
	delete(webhookPod.Labels, "pod-template-hash")
	assert.Equal(t, cliPod.Labels, webhookPod.Labels)
	assert.Equal(t, "web", webhookPod.Labels[vocab.LabelProxyDeployment], "both name the Deployment")
	assert.Equal(t, cliPod.Annotations, webhookPod.Annotations)
	assert.Equal(t, cliPod.Spec, webhookPod.Spec)
	assert.Equal(t, "250Mi", cliPod.Annotations[vocab.AnnotationProxyMemoryLimit], "namespace value inherited")
}

func ptrTo[T any](v T) *T { return &v }
