package webhook_test

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// BenchmarkInjectorHTTPS drives the mutating webhook over HTTPS on loopback
// with 16 concurrent clients: flat out ("saturated"), and paced at 500
// requests per second ("500rps"). It reports requests per second and the
// 50th and 99th percentile latency in milliseconds.
func BenchmarkInjectorHTTPS(b *testing.B) {
	const concurrency = 16
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	h, err := webhook.NewInjector(testValues(b), nss)
	if err != nil {
		b.Fatal(err)
	}
	url, client := serveTLS(b, h)
	body := podReview(b, "bench", appPod("shop", map[string]string{vocab.AnnotationProxyCPURequest: "100m"}))

	call := func() (time.Duration, error) {
		start := time.Now()
		resp, err := client.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), err
	}
	// Warm the connection pool so handshakes are not measured.
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() { _, _ = call() })
	}
	wg.Wait()

	run := func(b *testing.B, interval time.Duration) {
		lat := make([]time.Duration, b.N)
		var next atomic.Int64
		var tick <-chan time.Time
		if interval > 0 {
			t := time.NewTicker(interval)
			defer t.Stop()
			tick = t.C
		}
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					if tick != nil {
						<-tick
					}
					d, err := call()
					if err != nil {
						b.Error(err)
						return
					}
					lat[i] = d
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		pct := func(p float64) float64 {
			return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
		b.ReportMetric(pct(0.50), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
	}
	b.Run("saturated", func(b *testing.B) { run(b, 0) })
	b.Run("500rps", func(b *testing.B) { run(b, 2*time.Millisecond) })
}

// BenchmarkInjectorReview serves one typical pod's review through the
// injector's handler, without a network: the server's own work and
// allocations per review (decode, render, patch, response).
//
//	go test -run '^$' -bench BenchmarkInjectorReview -benchmem ./mesh/inject/webhook/
func BenchmarkInjectorReview(b *testing.B) {
	nss := inject.NewStaticNamespaces(namespace("shop", map[string]string{vocab.AnnotationInject: "enabled"}))
	h, err := webhook.NewInjector(testValues(b), nss)
	if err != nil {
		b.Fatal(err)
	}
	body := podReview(b, "bench", appPod("shop", map[string]string{vocab.AnnotationProxyCPURequest: "100m"}))
	b.ReportAllocs()
	for b.Loop() {
		if code := serveOne(b, h, body); code != http.StatusOK {
			b.Fatalf("status %d", code)
		}
	}
}
