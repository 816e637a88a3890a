package webhook

import (
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject"
)

// TestWriteResponseSendsWhatMarshalGivesWithItsLength: the recycled-buffer
// encoding answers byte for byte what json.Marshal of the review gives
// (no trailing newline, HTML characters escaped alike), with a matching
// Content-Length, for a small answer, one with a patch, and one larger
// than the buffers kept for reuse; a buffer reused after a larger answer
// carries nothing of it.
func TestWriteResponseSendsWhatMarshalGivesWithItsLength(t *testing.T) {
	pt := admissionv1.PatchTypeJSONPatch
	responses := []*admissionv1.AdmissionResponse{
		{UID: types.UID("a"), Allowed: true},
		{UID: types.UID("b<&>"), Allowed: true, PatchType: &pt, Patch: []byte(`[{"op":"add","path":"/metadata/annotations/x","value":"<&>"}]`),
			Warnings: []string{"a warning with <html> & \u2028"}},
		{UID: types.UID("c"), Allowed: false, Result: &metav1.Status{Message: strings.Repeat("m", 2*maxPooledResponse)}},
		{UID: types.UID("d"), Allowed: true},
	}
	bufs := new(responseBuffers)
	for _, resp := range responses {
		rec := httptest.NewRecorder()
		require.NoError(t, writeResponse(rec, resp, bufs))
		want, err := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Response: resp,
		})
		require.NoError(t, err)
		assert.Equal(t, string(want), rec.Body.String(), "uid %s", resp.UID)
		assert.Equal(t, strconv.Itoa(len(want)), rec.Header().Get("Content-Length"), "uid %s", resp.UID)
		assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	}
}

// TestResponseBuffersDropWhatGrewPastTheCap: a buffer grown past
// maxPooledResponse is not kept; a small one comes back empty.
func TestResponseBuffersDropWhatGrewPastTheCap(t *testing.T) {
	var p responseBuffers
	big := p.get()
	big.Grow(2 * maxPooledResponse)
	p.put(big)
	small := p.get()
	small.WriteString("left over")
	p.put(small)
	for range 4 {
		b := p.get()
		assert.LessOrEqual(t, b.Cap(), maxPooledResponse, "a buffer past the cap came back")
		assert.Zero(t, b.Len(), "a recycled buffer kept its content")
	}
}

// TestEncodedPatchIsWhatMarshalGives: a rendered pod's patch, encoded into
// a recycled buffer that held a larger document before, is byte for byte
// json.Marshal's (the form the inject golden tests pin).
func TestEncodedPatchIsWhatMarshalGives(t *testing.T) {
	values := inject.DefaultValues()
	values.IdentityTrustAnchorsPEM = string(testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.test"}).CertPEM)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", Annotations: map[string]string{"linkerd.io/inject": "enabled", "note": "<&>"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}},
	}
	patch, _, err := inject.Render(pod, nil, values)
	require.NoError(t, err)
	require.NotEmpty(t, patch)
	want, err := json.Marshal(patch)
	require.NoError(t, err)

	bufs := new(responseBuffers)
	old := bufs.get()
	old.WriteString(strings.Repeat("x", 2*len(want)))
	bufs.put(old)
	buf := bufs.get()
	got, err := encodeJSON(buf, patch)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}
