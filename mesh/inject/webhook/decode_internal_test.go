package webhook

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// FuzzDecodeRequestAgreesWithDecodeReview: the handlers' decoder (which
// decodes the object while parsing and keeps no copy of it) accepts and
// refuses exactly what DecodeReview does, reads the same envelope, and
// decodes the same pod as json.Unmarshal of request.object.
func FuzzDecodeRequestAgreesWithDecodeReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"name":"p"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","object":{"spec":{"containers":7}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","object":null,"dryRun":true}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","object":[1]}} x`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","UID":"b","object":{},"Object":{"metadata":{"name":"q"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a"}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := DecodeReview(body)
		got, gotErr := decodeRequest[podObject](body)
		if wantErr != nil {
			require.Error(t, gotErr, "DecodeReview refused it: %v", wantErr)
			assert.True(t, errors.Is(gotErr, ErrBadReview))
			return
		}
		require.NoError(t, gotErr)
		w := want.Request
		assert.Equal(t, w.UID, got.UID)
		assert.Equal(t, w.Kind, got.Kind)
		assert.Equal(t, w.Operation, got.Operation)
		assert.Equal(t, w.Namespace, got.Namespace)
		assert.Equal(t, w.SubResource, got.SubResource)
		assert.Equal(t, w.DryRun, got.DryRun)
		raw := w.Object.Raw
		if len(raw) == 0 || string(raw) == "null" {
			assert.Nil(t, got.Object.pod)
			assert.NoError(t, got.Object.err)
			return
		}
		var pod corev1.Pod
		if err := json.Unmarshal(raw, &pod); err != nil {
			assert.Error(t, got.Object.err)
			return
		}
		require.NoError(t, got.Object.err)
		assert.Equal(t, &pod, got.Object.pod)
	})
}
