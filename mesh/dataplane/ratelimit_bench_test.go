package dataplane_test

import (
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// BenchmarkHTTPInboundRateLimit is the proxy pair of the HTTP benchmarks
// with and without a rate limit on the server's port (a total and a
// per-identity limit far above what the loop sends, so that nothing is
// refused and both variants do the same work otherwise). Each iteration
// is a round of 1,000 requests (8 workers, kept-alive HTTP/1.1) per
// variant, the variants taking turns to go first; it reports, per
// variant, the median over rounds of the process CPU per request and the
// heap allocations per request (clients, proxies and application
// together: the difference between the variants is the limit's cost).
//
//	go test -run XXX -bench HTTPInboundRateLimit -benchtime 10x ./mesh/dataplane
func BenchmarkHTTPInboundRateLimit(b *testing.B) {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	type variant struct {
		name        string
		url         string
		c           *http.Client
		cpu, allocs []float64 // per round, per request
	}
	variants := []*variant{
		{name: "no-limit", url: startHTTPPair(b, httpPairOptions{app: app, serverPolicy: limitedServer("web", nil)}).url("/")},
		{name: "limit", url: startHTTPPair(b, httpPairOptions{app: app,
			serverPolicy: limitedServer("web", &authz.RateLimit{Meta: rateLimitMeta("bench"), Total: 4e9, Identity: 4e9})}).url("/")},
	}
	const perRound, workers = 1000, 8
	var ms runtime.MemStats
	round := func(v *variant) {
		runtime.ReadMemStats(&ms)
		mallocs := ms.Mallocs
		start := cpuTime()
		getConcurrently(b, v.c, v.url, perRound, workers)
		n := float64(perRound / workers * workers)
		v.cpu = append(v.cpu, float64(cpuTime()-start)/float64(time.Microsecond)/n)
		runtime.ReadMemStats(&ms)
		v.allocs = append(v.allocs, float64(ms.Mallocs-mallocs)/n)
	}
	for _, v := range variants {
		v.c = h1Client()
		v.c.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
		round(v) // warm connections, caches and the client's bucket
		v.cpu, v.allocs = nil, nil
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range variants {
			round(variants[(i+j)%len(variants)])
		}
	}
	b.StopTimer()
	for _, v := range variants {
		b.ReportMetric(medianOf(v.cpu), v.name+"-cpu-us/req")
		b.ReportMetric(medianOf(v.allocs), v.name+"-allocs/req")
		b.Logf("%s: cpu us/req per round %.1f, allocs/req %.1f", v.name, v.cpu, v.allocs)
	}
	b.ReportMetric(0, "ns/op")
}
