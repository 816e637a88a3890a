package webhook_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
)

func testValues(t testing.TB) inject.Values {
	t.Helper()
	v := inject.DefaultValues()
	v.Version = "v0.1.0"
	v.IdentityTrustAnchorsPEM = string(testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test"}).CertPEM)
	return v
}

// reviewTimeout bounds one review's round trip in these tests. It ends a
// hung test; it does not time the server. The largest reviews (3 to 4 MiB,
// several per test) cost seconds of CPU under the race detector, and on
// a 2-core machine loaded ten times over (CI beside a CPU hog) one took
// more than 10 s: so a minute.
const reviewTimeout = time.Minute

// serveTLS serves h over HTTPS on 127.0.0.1 with a certificate made at run
// time and returns the base URL and a client that trusts it.
func serveTLS(t testing.TB, h http.Handler) (string, *http.Client) {
	t.Helper()
	ca := testutil.NewAnchor(t, testutil.CertOptions{Name: "webhook-ca.test"})
	leaf := ca.Leaf(t, testutil.CertOptions{Name: "weft-injector.weft.svc", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = testutil.Listen(t)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := &http.Client{
		Timeout: reviewTimeout,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: testutil.Pool(ca), MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: 32,
		},
	}
	t.Cleanup(client.CloseIdleConnections)
	return srv.URL, client
}

func podReview(t testing.TB, uid string, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	return review(t, &admissionv1.AdmissionRequest{
		UID:       types.UID(uid),
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: pod.Namespace,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
	})
}

func review(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(t, err)
	return b
}

func post(t testing.TB, client *http.Client, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func decodeResponse(t testing.TB, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &out), string(body))
	require.Equal(t, "admission.k8s.io/v1", out.APIVersion)
	require.Equal(t, "AdmissionReview", out.Kind)
	require.NotNil(t, out.Response)
	return out.Response
}

// applyResponse applies the response's patch to pod with an independent
// JSON Patch library and decodes the result strictly.
func applyResponse(t testing.TB, pod *corev1.Pod, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	require.NoError(t, err)
	out := doc
	if len(resp.Patch) > 0 {
		require.NotNil(t, resp.PatchType)
		require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
		p, err := jsonpatch.DecodePatch(resp.Patch)
		require.NoError(t, err)
		out, err = p.Apply(doc)
		require.NoError(t, err)
	}
	var res corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(out, &res))
	return &res
}

func appPod(ns string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "web-7d9f8-", Namespace: ns,
			Labels: map[string]string{"app": "web"}, Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web",
			Containers:         []corev1.Container{{Name: "web", Image: "example.com/web:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
		},
	}
}

func namespace(name string, annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}
