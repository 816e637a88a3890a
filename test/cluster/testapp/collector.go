package main

import (
	"net/http"

	"github.com/weftmesh/weft/internal/testutil/otlptest"
)

// The collector mode (--otlp): the project's test collector
// (internal/testutil/otlptest, a real OTLP/gRPC TraceService) in a pod,
// so that the cluster suite can read what the proxies exported. Its
// proxy terminates the mesh TLS the exporting proxies speak; the
// collector itself sees plaintext gRPC.
//
// It keeps every span it receives, without bound: it is meant for a
// test's few requests, not for traffic.

// SpanJSON is one span as /spans answers it: ids in lower-case hex, the
// kind as OTLP names it (SPAN_KIND_CLIENT), attributes and resource
// attributes as text.
type SpanJSON struct {
	TraceID    string            `json:"traceId"`
	SpanID     string            `json:"spanId"`
	ParentID   string            `json:"parentSpanId,omitempty"`
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Attributes map[string]string `json:"attributes"`
	Resource   map[string]string `json:"resource"`
}

// spansHandler answers GET /spans[?trace=ID] with the spans col received
// (those of trace ID, 32 hex digits, when given), in arrival order.
func spansHandler(col *otlptest.Collector) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		trace := r.URL.Query().Get("trace")
		if trace != "" && !isTraceID(trace) {
			http.Error(w, "trace: want 32 lower-case hex digits", http.StatusBadRequest)
			return
		}
		out := []SpanJSON{}
		for _, s := range col.Spans() {
			if trace != "" && s.TraceID() != trace {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range s.GetAttributes() {
				attrs[kv.GetKey()] = otlptest.AttrValue(s.GetAttributes(), kv.GetKey())
			}
			out = append(out, SpanJSON{
				TraceID: s.TraceID(), SpanID: s.SpanID(), ParentID: s.ParentID(),
				Name: s.GetName(), Kind: s.GetKind().String(), Attributes: attrs, Resource: s.Resource,
			})
		}
		writeJSON(w, out)
	})
}

func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
