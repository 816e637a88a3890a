package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// FuzzDecodeReview feeds arbitrary bytes to the AdmissionReview decoder: it
// must never panic, and whatever it accepts has a request with a UID.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"request":{"object":{"raw":[1,2]}}}{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := webhook.DecodeReview(body)
		if err != nil {
			assert.ErrorIs(t, err, webhook.ErrBadReview)
			return
		}
		require.NotNil(t, r.Request)
		assert.NotEmpty(t, r.Request.UID)
	})
}

// FuzzInjectorPod wraps an arbitrary object in a valid pod review: the
// injector must never panic or fail with 500, and any patch it returns
// must apply to the object it was given.
func FuzzInjectorPod(f *testing.F) {
	pod, _ := json.Marshal(appPod("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	f.Add(pod)
	f.Add([]byte(`{"metadata":{"annotations":{"linkerd.io/inject":"enabled","config.linkerd.io/opaque-ports":"x~y/z"}},"spec":{}}`))
	f.Add([]byte(`{"metadata":{"labels":null,"annotations":{"a/b~c":"1"}},"spec":{"containers":null,"volumes":[]}}`))
	f.Add([]byte(`{"spec":{"hostNetwork":true}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`"x"`))
	h, err := webhook.NewInjector(testValues(f), inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"})))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "f", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Namespace: "shop", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}},
		})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		require.NotNil(t, out.Response)
		if len(out.Response.Patch) == 0 {
			return
		}
		// The webhook decoded obj as a Pod; the API server applies the
		// patch to the pod it holds, which is obj re-encoded.
		var p corev1.Pod
		require.NoError(t, json.Unmarshal(obj, &p))
		doc, err := json.Marshal(&p)
		require.NoError(t, err)
		jp, err := jsonpatch.DecodePatch(out.Response.Patch)
		require.NoError(t, err)
		_, err = jp.Apply(doc)
		require.NoError(t, err)
	})
}

// FuzzValidator feeds arbitrary objects of a validated kind to the
// validating webhook: it must answer every one with an AdmissionReview.
func FuzzValidator(f *testing.F) {
	f.Add("linkerd.io", "v1alpha2", "ServiceProfile", []byte(`{"apiVersion":"linkerd.io/v1alpha2","kind":"ServiceProfile","metadata":{"name":"a.b.svc.cluster.local"},"spec":{"routes":[{"name":"r","condition":{"not":{"not":{"method":"GET"}}}}]}}`))
	f.Add("policy.linkerd.io", "v1alpha1", "NetworkAuthentication", []byte(`{"apiVersion":"policy.linkerd.io/v1alpha1","kind":"NetworkAuthentication","metadata":{"name":"n"},"spec":{"networks":[{"cidr":"::/0","except":["::1"]}]}}`))
	f.Add("policy.linkerd.io", "v1beta3", "Server", []byte(`{"apiVersion":"policy.linkerd.io/v1beta3","kind":"Server","metadata":{"name":"s"},"spec":{"port":"x"}}`))
	v, err := webhook.NewValidator()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, group, version, kind string, obj []byte) {
		if !json.Valid(obj) {
			return
		}
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "f", Kind: metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
				Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj}},
		})
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		v.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	})
}
