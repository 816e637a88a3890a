package webhook_test

// Memory of the admission webhooks per review, measured with
// runtime.MemStats (issue 13: about 33 MB per in-flight 10 MB review, and
// 650 MB for 16 at once):
//
//	go test -run '^$' -bench 'ReviewMemory|InjectorHeap' -benchtime 20x ./mesh/inject/webhook/
//
// BenchmarkReviewMemory reports the bytes allocated per review (B/op) for
// pods and ServiceProfiles of 1 and 3 MiB, the size of the review
// ("input-B"), and about the most heap one review holds at once, as a
// multiple of its size ("peak-x", sampled with the collector running
// almost continuously). BenchmarkInjectorHeapInFlight holds
// reviews of 3 MiB parked in the namespace lookup and reports the heap
// each keeps ("held-B", "held-x"). BenchmarkInjectorHeapUnderFlood sends
// 64 such reviews at once over HTTPS and reports the heap in use while the
// admitted ones are parked, and how many were admitted.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// bigPodReview returns the review of a pod of about size bytes in all:
// half in a last-applied-configuration annotation, half in environment
// variables of the application container, the two ways real pods grow.
func bigPodReview(tb testing.TB, size int) []byte {
	tb.Helper()
	pod := appPod("shop", map[string]string{"kubectl.kubernetes.io/last-applied-configuration": ""})
	for i := 0; i < size/2/64; i++ {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{
			Name: fmt.Sprintf("SETTING_%06d", i), Value: strings.Repeat("v", 30),
		})
	}
	rest := size - len(podReview(tb, "big", pod))
	pod.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = strings.Repeat("spec.x=1,", rest/9+1)[:max(rest, 0)]
	return podReview(tb, "big", pod)
}

// bigProfileReview returns a review of a ServiceProfile of about size bytes
// (many routes), for op; an UPDATE carries the object twice, as the API
// server sends it.
func bigProfileReview(tb testing.TB, size int, op admissionv1.Operation) []byte {
	tb.Helper()
	var routes []string
	for i := 0; len(routes)*120 < size; i++ {
		routes = append(routes, fmt.Sprintf(`{"name":"GET /api/v1/items/%06d","condition":{"method":"GET","pathRegex":"/api/v1/items/%06d/[^/]*"},"isRetryable":true}`, i, i))
	}
	obj := []byte(`{"apiVersion":"linkerd.io/v1alpha2","kind":"ServiceProfile","metadata":{"name":"web.shop.svc.cluster.local","namespace":"shop"},"spec":{"routes":[` + strings.Join(routes, ",") + `]}}`)
	req := &admissionv1.AdmissionRequest{
		UID:       "sp-1",
		Kind:      metav1.GroupVersionKind{Group: "linkerd.io", Version: "v1alpha2", Kind: "ServiceProfile"},
		Resource:  metav1.GroupVersionResource(schema.GroupVersionResource{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles"}),
		Namespace: "shop", Name: "web.shop.svc.cluster.local", Operation: op,
	}
	req.Object.Raw = obj
	if op == admissionv1.Update {
		req.OldObject.Raw = obj
	}
	return review(tb, req)
}

// parkedNamespaces holds every lookup until released, so reviews can be
// kept in flight at a known point.
type parkedNamespaces struct {
	entered chan struct{}
	release chan struct{}
}

func (p *parkedNamespaces) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	p.entered <- struct{}{}
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return namespace(name, map[string]string{vocab.AnnotationInject: "enabled"}), nil
}

// peakHeap runs f with the collector running almost continuously (GOGC=2)
// and returns about the largest heap f held at once above what was live
// before: the heap is sampled every 100 µs.
func peakHeap(f func()) float64 {
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
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

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func serveOne(b *testing.B, h http.Handler, body []byte) int {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func BenchmarkReviewMemory(b *testing.B) {
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	injector, err := webhook.NewInjector(testValues(b), nss)
	if err != nil {
		b.Fatal(err)
	}
	validator, err := webhook.NewValidator(webhook.WithMaxBodyBytes(16 << 20))

	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{1 << 20, 3 << 20} {
		inputs := []struct {
			name string
			h    http.Handler
			body []byte
		}{
			{"inject-pod", injector, bigPodReview(b, size)},
			{"validate-create", validator, bigProfileReview(b, size, admissionv1.Create)},
			{"validate-update", validator, bigProfileReview(b, size, admissionv1.Update)},
		}
		for _, in := range inputs {
			b.Run(fmt.Sprintf("%s/%dMiB", in.name, size>>20), func(b *testing.B) {
				if code := serveOne(b, in.h, in.body); code != http.StatusOK {
					b.Fatalf("status %d for a %d-byte review", code, len(in.body))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					serveOne(b, in.h, in.body)
				}
				b.StopTimer()
				b.ReportMetric(float64(len(in.body)), "input-B")
				peak := peakHeap(func() { serveOne(b, in.h, in.body) })
				b.ReportMetric(peak/float64(len(in.body)), "peak-x")
			})
		}
	}
}

// BenchmarkInjectorHeapInFlight parks reviews of 3 MiB in the namespace
// lookup and reports the heap each holds there.
func BenchmarkInjectorHeapInFlight(b *testing.B) {
	const parked = 4
	body := bigPodReview(b, 3<<20)
	for range b.N {
		nss := &parkedNamespaces{entered: make(chan struct{}), release: make(chan struct{})}
		h, err := webhook.NewInjector(testValues(b), nss, webhook.WithMaxBodyBytes(16<<20))
		if err != nil {
			b.Fatal(err)
		}
		before := heapAlloc()
		var wg sync.WaitGroup
		for range parked {
			wg.Go(func() { serveOne(b, h, body) })
			<-nss.entered
		}
		held := (float64(heapAlloc()) - float64(before)) / parked
		close(nss.release)
		wg.Wait()
		b.ReportMetric(held, "held-B")
		b.ReportMetric(held/float64(len(body)), "held-x")
	}
}

// BenchmarkInjectorHeapUnderFlood sends 64 reviews of 3 MiB at once over
// HTTPS to an injector whose lookups are parked, and reports the heap in
// use once every request was either parked or answered, and how many were
// admitted (parked) rather than refused.
func BenchmarkInjectorHeapUnderFlood(b *testing.B) {
	const flood = 64
	body := bigPodReview(b, 3<<20)
	for range b.N {
		nss := &parkedNamespaces{entered: make(chan struct{}, flood), release: make(chan struct{})}
		h, err := webhook.NewInjector(testValues(b), nss)
		if err != nil {
			b.Fatal(err)
		}
		url, tlsClient := serveTLS(b, h)
		// No client timeout: on a slow machine, decoding 64 reviews at
		// once takes longer than serveTLS's 10 s, and every request must
		// end parked or answered by the server.
		client := *tlsClient
		client.Timeout = 0
		before := heapAlloc()
		var answered atomic.Int32
		var wg sync.WaitGroup
		done := make(chan struct{}, flood)
		for range flood {
			wg.Go(func() {
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err == nil {
					resp.Body.Close()
				}
				answered.Add(1)
				done <- struct{}{}
			})
		}
		// Every request is either parked in the lookup or answered.
		parked := 0
		for parked+int(answered.Load()) < flood {
			select {
			case <-nss.entered:
				parked++
			case <-done:
			}
		}
		inUse := (float64(heapAlloc()) - float64(before)) / (1 << 20)
		close(nss.release)
		wg.Wait()
		client.CloseIdleConnections()
		b.ReportMetric(inUse, "heap-MiB")
		b.ReportMetric(float64(parked), "admitted")
	}
}
