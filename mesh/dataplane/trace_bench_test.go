package dataplane_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testutil/otlptest"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
	"github.com/weftmesh/weft/mesh/dataplane/tracing/otlpexport"
)

// BenchmarkHTTPTracing sends one request at a time through a proxy pair
// (as BenchmarkHTTP1Latency's weft-pair) with tracing off, and with
// tracing on for requests without a context, with an unsampled one and
// with a sampled one (two spans per request, exported to a collector in
// this process, whose CPU and allocations are in the figures too). For
// rounds that alternate the variants, run the benchmark several times
// (-count repeats each variant in a row):
//
//	go test -c -o /tmp/dp.test ./mesh/dataplane && cd mesh/dataplane &&
//	for r in 1 2 3; do /tmp/dp.test -test.run XXX -test.bench HTTPTracing -test.benchmem -test.benchtime 3000x; done
func BenchmarkHTTPTracing(b *testing.B) {
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "hello from the application\n")
	}
	col := otlptest.Start(b)
	tracer := func() *otlpexport.Tracer {
		tr, err := otlpexport.New(context.Background(), tracing.Config{CollectorAddr: col.Addr()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tr.Shutdown(ctx)
		})
		return tr
	}
	off := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b)})
	trA, trB := tracer(), tracer()
	on := startHTTPPair(b, httpPairOptions{app: app, serverPolicy: allowAll(b),
		optsA: []dataplane.Option{dataplane.WithTracer(trA)}, optsB: []dataplane.Option{dataplane.WithTracer(trB)}})
	variants := []struct {
		name        string
		hp          *httpPair
		traceparent string
	}{
		{"tracing-off", off, ""},
		{"tracing-on-no-context", on, ""},
		{"tracing-on-unsampled", on, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"tracing-on-sampled", on, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			c := h1Client()
			req, err := http.NewRequest(http.MethodGet, v.hp.url("/"), nil)
			if err != nil {
				b.Fatal(err)
			}
			if v.traceparent != "" {
				req.Header.Set("Traceparent", v.traceparent)
			}
			benchDo(b, 1, func() {
				resp, err := c.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Errorf("status %d", resp.StatusCode)
				}
			})
		})
	}
}
