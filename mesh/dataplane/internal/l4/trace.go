package l4

import (
	"bufio"
	"net"
	"net/http"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
)

// serveTraced serves a request when tracing is on: one that carries no
// trace context is served as it would be without tracing; one that does
// is served inside the proxy's span, which ends with the response (or
// with the exchange's abort).
func (p *Paths) serveTraced(w http.ResponseWriter, r *http.Request, info *connInfo) {
	parent, ok := trace.Read(r.Header)
	if !ok {
		p.dispatch(w, r, info)
		return
	}
	kind := trace.Client
	if info.direction == Inbound {
		kind = trace.Server
	}
	sp := p.tracer.Start(parent, kind, r)
	// The header is the request's own and is what both directions send
	// on (cleaned in place or copied), so the next hop, and inbound the
	// application, sees this proxy's span as its parent.
	trace.Write(r.Header, parent, sp.ID())
	tw := &traceWriter{ResponseWriter: w}
	ended := false
	defer func() {
		if !ended { // the handler aborted the exchange (a panic on its way up)
			sp.End(tw.status, "", "aborted")
		}
	}()
	p.dispatch(tw.wrap(), r, info)
	ended = true
	h := w.Header()
	gs := h.Get("Grpc-Status")
	if gs == "" {
		gs = h.Get(http.TrailerPrefix + "Grpc-Status")
	}
	class := ""
	if pe := h.Get(httpcore.HeaderProxyError); pe != "" {
		class, _, _ = strings.Cut(pe, ":")
	}
	sp.End(tw.status, gs, class)
}

// traceWriter records the status of the response head for the span.
type traceWriter struct {
	http.ResponseWriter
	status int
}

func (w *traceWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // informational answers are not the response
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *traceWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes through when the underlying writer can flush.
func (w *traceWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *traceWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// traceHijacker is a traceWriter over a writer that can be hijacked (an
// HTTP/1 upgrade); the switch counts as 101.
type traceHijacker struct{ *traceWriter }

func (w traceHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// wrap returns the writer the handler gets: w, hijackable when the
// underlying writer is.
func (w *traceWriter) wrap() http.ResponseWriter {
	if _, ok := w.ResponseWriter.(http.Hijacker); ok {
		return traceHijacker{w}
	}
	return w
}
