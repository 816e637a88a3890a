package inbound

import (
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/internal/framerelay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// The frame path: a gRPC call for the local application relayed from
// the header fields and DATA the proxy's HTTP/2 server decoded to its
// HTTP/2 client's connection to the application, without an
// http.Request, header maps or an http.ResponseWriter (issue 28 item 3).
// Every step of Serve happens as on the http path, in the same order and
// with the same functions where they take no http types (decide, the
// rate limit, the series, inboundAnswer); what AcceptGRPC refuses goes
// to Serve.

// The frame path's seam types are httpcore's (the outbound side shares
// them).
type (
	FrameStream   = httpcore.FrameStream
	FieldRequest  = httpcore.FieldRequest
	FieldResponse = httpcore.FieldResponse
	TrailerSource = httpcore.TrailerSource
)

// AcceptGRPC says whether a request, given its decoded header fields
// (pseudo-header fields first, names in lower case), takes the frame
// path: a gRPC call (POST, one content-type application/grpc or
// application/grpc+...) whose path needs no escaping and has no query,
// without what the http path would treat specially: l5d-orig-proto (a
// peer proxy's HTTP/1 request, sent to the application over HTTP/1),
// content-length, and the hop-by-hop fields an HTTP/2 request can still
// carry. It runs on the server's read loop and allocates nothing.
func AcceptGRPC(fields []hpack.HeaderField) bool { return httpcore.AcceptGRPC(fields) }

// ServeFrames proxies one gRPC call AcceptGRPC took to the local
// application over HTTP/2, as Serve does: authorize it by the port's
// policy and rate limit, give the application its fields without mesh
// fields and with the verified client identity, forward it with the
// normalized path the policy decided on, and relay the answer or answer
// the cause of a failure. AppH2Fields is the round trip; the frame path
// is only taken on a proxy without an access log (UpstreamTimer is not
// called).
func (h *HTTP) ServeFrames(st FrameStream, info *Conn) {
	c := inboundCall{h: h, st: st, info: info, grpc: true, now: time.Now()}
	defer c.endTap()
	areq := authz.Request{Method: st.Method(), Path: st.Path(), Host: st.Authority()}
	canonical, named := dstCanonical(st.Fields())
	if err := c.decide(st.Context(), &areq, canonical, named); err != nil {
		c.fail(err)
		return
	}
	c.stats.Begin(c.series.rt, c.now)
	c.stats.Attempt(c.series.ep)

	c.cbody = &httpcore.ClientBody{ReadCloser: st.Body()}
	path := st.Path()
	if c.res.Path != "" {
		path = c.res.Path
	}
	resp, err := h.AppH2Fields(st.Context(), &FieldRequest{Method: st.Method(), Authority: st.Authority(), Path: path,
		Fields: c.appFields(), Body: c.cbody}, netip.AddrPortFrom(h.App, info.Port))
	if err != nil {
		c.fail(c.cause(err))
		return
	}
	c.relayFrames(&resp)
}

// dstCanonical returns the l5d-dst-canonical field's value, and whether
// the request has exactly one.
func dstCanonical(fields []hpack.HeaderField) (v string, one bool) {
	n := 0
	for _, f := range fields {
		if f.Name == "l5d-dst-canonical" {
			v = f.Value
			n++
		}
	}
	return v, n == 1
}

// appFields edits the request's fields in place into what the
// application sees, as header does for the http path: no mesh fields
// from the client (the hop-by-hop ones AcceptGRPC refused, or the
// server did), the verified client identity from this proxy.
func (c *inboundCall) appFields() []hpack.HeaderField {
	out := httpcore.WithoutMeshFields(c.st.Fields())
	if p := c.info.Peer; p.TLS && p.Identity != "" {
		out = append(out, hpack.HeaderField{Name: "l5d-client-id", Value: p.Identity})
	}
	return out
}

// relayFrames sends the application's response to the client without
// mesh or hop-by-hop fields, and records how the exchange ended, as
// relay does (the same classes, series, tap events and resets). As
// httpcore.CopyResponse, the head waits for the first read of the body,
// so that a response ending with it is one HEADERS with END_STREAM, and
// what has arrived is flushed when no more is ready; as on the http path,
// where the ResponseWriter ends the stream after the handler returns,
// the exchange is recorded before the response's last block is written.
func (c *inboundCall) relayFrames(resp *FieldResponse) {
	framerelay.Relay(c.st, resp, framerelay.Exchange{
		Classes: c.classes, Stats: &c.stats, Tap: &c.tr,
		Clean: func(f []hpack.HeaderField) []hpack.HeaderField { return httpcore.RelayedFields(f, false) },
	})
}

// answerFrames writes the proxy's own answer: a trailers-only response.
func (c *inboundCall) answerFrames(status int, fields []hpack.HeaderField) {
	_ = c.st.WriteHeader(http.StatusOK, fields, true)
	if c.tr != nil {
		c.tr.ResponseInit(status, httpcore.FieldHeader(fields), true)
	}
}

// matchesHeaders reports whether a server's routes match on request
// headers: only then does the frame path build the header the evaluator
// reads.
func matchesHeaders(srv *authz.Server) bool {
	for i := range srv.HTTPRoutes {
		for _, r := range srv.HTTPRoutes[i].Rules {
			for _, m := range r.Matches {
				if len(m.Headers) > 0 {
					return true
				}
			}
		}
	}
	for i := range srv.GRPCRoutes {
		for _, r := range srv.GRPCRoutes[i].Rules {
			for _, m := range r.Matches {
				if len(m.Headers) > 0 {
					return true
				}
			}
		}
	}
	return false
}
