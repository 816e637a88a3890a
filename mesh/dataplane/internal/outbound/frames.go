package outbound

import (
	"io"
	"net/http"

	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/internal/framerelay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
)

// The frame path of the outbound side: a gRPC call from the local
// application relayed from the header fields and DATA the proxy's HTTP/2
// server decoded to the HTTP/2 client's connection to the endpoint
// (RoundTripFields), without an http.Request, header maps or an
// http.ResponseWriter (issue 28 item 3). Every step of Serve happens, in
// the same order and with the same functions (route selection, the
// route's own answers, timeouts, attempts with retries over the kept
// body, the balancer's hints, outboundAnswer, the series, the tap);
// only the request's and the response's form differ. What AcceptGRPC
// refuses goes to Serve.

// AcceptGRPC says whether a request from the local application, given
// its decoded header fields, takes the frame path: the calls
// httpcore.AcceptGRPC takes (a plain gRPC call over HTTP/2: POST, a gRPC
// content-type, a plain path without query, no content-length, no
// l5d-orig-proto, no hop-by-hop field). Everything else (HTTP/1, other
// methods and content types, an upgrade) is Serve's. It runs on the
// server's read loop and allocates nothing.
func AcceptGRPC(fields []hpack.HeaderField) bool { return httpcore.AcceptGRPC(fields) }

// ServeFrames proxies one gRPC call AcceptGRPC took, from the local
// application on conn (HTTP/2) to svc, as Serve does. RoundTripFields
// is the exchange with the endpoint.
func (h *HTTP) ServeFrames(st httpcore.FrameStream, conn *httpcore.Conn, svc Service) {
	c := outboundCall{h: h, st: st, conn: conn, svc: svc, grpc: true,
		method: st.Method(), reqCtx: st.Context(), contentLength: -1, hasBody: true}
	c.serve()
}

// sendFields is send's exchange on the frame path: the client's fields
// without mesh fields (cleaned in place by the first attempt, after the
// tap read them as the http path's does), the route's and the backend's
// request filters when there are any, l5d-dst-canonical for a peer
// proxy.
func (a *outboundAttempt) sendFields(c *outboundCall, body io.ReadCloser) error {
	rt := c.rt
	if c.fields == nil {
		c.fields = httpcore.WithoutMeshFields(c.st.Fields())
	}
	fields := c.fields
	if rt.RequestHeaders != nil || a.backend.RequestHeaders != nil {
		h := httpcore.FieldHeader(fields)
		rt.RequestHeaders.Apply(h)
		a.backend.RequestHeaders.Apply(h)
		fields = httpcore.HeaderFields(make([]hpack.HeaderField, 0, len(fields)+1), h)
	}
	if n := c.svc.Names(); n.Canonical != "" && a.h.Value().Identity != "" {
		// Appended in the slot the server left after the fields; every
		// attempt writes the same value there.
		fields = append(fields, hpack.HeaderField{Name: "l5d-dst-canonical", Value: n.Canonical})
	}
	resp, err := c.h.RoundTripFields(a.ctx, httpcore.FieldRequest{Method: c.method, Authority: c.st.Authority(),
		Path: c.rawPath, Fields: fields, Body: body}, a.h.Value(), c.rb)
	if err != nil {
		return err
	}
	a.fresp, a.status, a.gs = resp, resp.Status, httpcore.FieldValue(resp.Fields, "grpc-status")
	return nil
}

// relayFrames sends the response the last attempt got to the client, as
// relay does: without mesh fields but for a peer proxy's explanation of
// its answer, without hop-by-hop fields, with the route's response
// filters, recording the same classes, series, tap events and resets.
// As on the inbound side's frame path, the exchange is recorded before
// the response's last block is written (the http path's ResponseWriter
// ends the stream after the handler returns).
func (c *outboundCall) relayFrames(a *outboundAttempt) {
	meshed := a.h.Value().Identity != ""
	framerelay.Relay(c.st, &a.fresp, framerelay.Exchange{
		Classes: c.rt.Classes, Stats: &c.stats, Tap: &c.tr, Touch: c.touch,
		Clean: func(f []hpack.HeaderField) []hpack.HeaderField { return c.responseFields(f, meshed) },
	})
}

// responseFields edits response fields or trailers in place into what
// the client gets, as relay's fix does: CleanResponseHeader's rules
// (a peer proxy's l5d-proxy-error and weft-deny-reason kept), hop-by-hop
// fields dropped, then the route's response filters.
func (c *outboundCall) responseFields(fields []hpack.HeaderField, meshed bool) []hpack.HeaderField {
	out := httpcore.RelayedFields(fields, meshed)
	if m := c.rt.ResponseHeaders; m != nil {
		h := httpcore.FieldHeader(out)
		m.Apply(h)
		out = httpcore.HeaderFields(out[:0], h)
	}
	return out
}

// answerFrames writes the proxy's own answer to the call as the http
// path's WriteAnswer and ResponseWriter do for gRPC: a trailers-only
// response, with the content-length: 0 the ResponseWriter declares for
// it. It returns the answer's header view for the tap (nil when no tap
// took the call).
func (c *outboundCall) answerFrames(e *httpcore.Answer) http.Header {
	fields := append(httpcore.GRPCAnswerFields(e, false), hpack.HeaderField{Name: "content-length", Value: "0"})
	_ = c.st.WriteHeader(http.StatusOK, fields, true)
	if c.tr == nil {
		return nil
	}
	// The http path's tap reads the header before the ResponseWriter
	// adds the content-length.
	return httpcore.FieldHeader(fields[:len(fields)-1])
}

// redirectFrames answers with the route's redirect, as redirect does.
func (c *outboundCall) redirectFrames() {
	st, rt := c.st, c.rt
	loc := rt.Redirect.Location("http", hostOnly(st.Authority()), hostPort(st.Authority()), st.Path(), "", rt.MatchedPrefix())
	fields := []hpack.HeaderField{{Name: "location", Value: loc}, {Name: "content-length", Value: "0"}}
	c.tapStart(nil)
	_ = st.WriteHeader(rt.Redirect.Status, fields, true)
	c.stats.Attempt(c.svc.LocalSeries())
	c.stats.Head(rt.Redirect.Status)
	c.stats.Done(rt.Redirect.Status, "", false, "")
	if c.tr != nil {
		c.tr.ResponseInit(rt.Redirect.Status, httpcore.FieldHeader(fields), true)
	}
	tap.End(&c.tr, 0, -1, -1, nil)
}

// hintFields is the header view of what a response's fields tell the
// balancer and the retry's wait (Retry-After, grpc-retry-pushback-ms),
// nil (nothing allocated) without either.
func hintFields(fields []hpack.HeaderField) http.Header {
	var h http.Header
	for _, f := range fields {
		var k string
		switch f.Name {
		case "retry-after":
			k = "Retry-After"
		case "grpc-retry-pushback-ms":
			k = "Grpc-Retry-Pushback-Ms"
		default:
			continue
		}
		if h == nil {
			h = http.Header{}
		}
		h[k] = append(h[k], f.Value)
	}
	return h
}
