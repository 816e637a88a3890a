package webhook

// The decoding of a pod review, before and after issue 13, side by side:
//
//	go test -run '^$' -bench DecodePodReview -benchtime 20x ./mesh/inject/webhook/
//
// "copying" is the old path: io.ReadAll of the body, a json.Decoder into
// admissionv1.AdmissionReview (RawExtension keeps a copy of the object),
// then the pod decoded from that copy. "streaming" is the handlers' path:
// the body read into one buffer of its exact size, the pod decoded while
// the review is parsed. Both report bytes allocated (B/op) and about the
// most heap held at once, as a multiple of the review's size (peak-x).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
)

func podReviewOfSize(b *testing.B, size int) []byte {
	b.Helper()
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Annotations: map[string]string{"a": strings.Repeat("spec.x=1,", size/2/9)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
	}
	for i := 0; i < size/2/64; i++ {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%06d", i), Value: strings.Repeat("v", 30)})
	}
	raw, err := json.Marshal(&pod)
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Namespace: "shop", Operation: admissionv1.Create, Object: kruntime.RawExtension{Raw: raw}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// keep holds decoded pods so the compiler keeps the work.
var keep atomic.Pointer[corev1.Pod]

func decodeCopying(r *http.Request) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		return err
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&review); err != nil {
		return err
	}
	var pod corev1.Pod
	if err := json.Unmarshal(review.Request.Object.Raw, &pod); err != nil {
		return err
	}
	keep.Store(&pod)
	return nil
}

func decodeStreaming(w http.ResponseWriter, r *http.Request) error {
	body, herr := readBody(w, r, 16<<20)
	if herr != nil {
		return fmt.Errorf("%s", herr.msg)
	}
	req, err := decodeRequest[podObject](body)
	if err != nil {
		return err
	}
	if req.Object.err != nil {
		return req.Object.err
	}
	keep.Store(req.Object.pod)
	return nil
}

func samplePeak(f func()) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	keep.Store(nil)
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	<-done
	return float64(peak.Load()) - float64(base)
}

func BenchmarkDecodePodReview(b *testing.B) {
	for _, size := range []int{1 << 20, 3 << 20} {
		body := podReviewOfSize(b, size)
		newReq := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}
		for _, path := range []string{"copying", "streaming"} {
			run := func() {
				var err error
				if path == "copying" {
					err = decodeCopying(newReq())
				} else {
					err = decodeStreaming(httptest.NewRecorder(), newReq())
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.Run(fmt.Sprintf("%s/%dMiB", path, size>>20), func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					run()
				}
				b.StopTimer()
				b.ReportMetric(float64(len(body)), "input-B")
				b.ReportMetric(samplePeak(run)/float64(len(body)), "peak-x")
			})
		}
	}
}
