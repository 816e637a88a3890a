package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The frame path: a gRPC call for the local application relayed from
// the header fields and DATA the proxy's HTTP/2 server decoded to its
// HTTP/2 client's connection to the application, without an
// http.Request, header maps or an http.ResponseWriter (issue 28 item 3).
// Every step of Serve happens as on the http path, in the same order and
// with the same functions where they take no http types (decide, the
// rate limit, the series, inboundAnswer); what AcceptGRPC refuses goes
// to Serve.

// FrameStream is a request served at frame level: the proxy's HTTP/2
// server's Stream (h2server.Stream), which this package does not link.
type FrameStream interface {
	Context() context.Context
	Method() string
	Authority() string
	Path() string
	// Fields are the request's regular header fields, names in lower
	// case, in the order they arrived; the slice is the stream's own.
	Fields() []hpack.HeaderField
	Body() io.ReadCloser
	WriteHeader(status int, fields []hpack.HeaderField, end bool) error
	Write(p []byte) error
	Flush() error
	End(trailers []hpack.HeaderField) error
	Reset(code http2.ErrCode)
}

// FieldRequest is a request to the application in header fields (the
// HTTP/2 client's RoundTripFields).
type FieldRequest struct {
	Method, Authority, Path string
	Fields                  []hpack.HeaderField
	Body                    io.ReadCloser
}

// FieldResponse is the application's answer to a FieldRequest: its
// status and fields, its body, and what has its trailers once the body
// ended (the HTTP/2 client's response: an interface, not a method
// value, so that nothing is allocated for it).
type FieldResponse struct {
	Status   int
	Fields   []hpack.HeaderField
	Body     io.ReadCloser
	Trailers TrailerSource
}

// TrailerSource has a response's trailer fields once its body ended.
type TrailerSource interface {
	Trailers() []hpack.HeaderField
}

// AcceptGRPC says whether a request, given its decoded header fields
// (pseudo-header fields first, names in lower case), takes the frame
// path: a gRPC call (POST, one content-type application/grpc or
// application/grpc+...) whose path needs no escaping and has no query,
// without what the http path would treat specially: l5d-orig-proto (a
// peer proxy's HTTP/1 request, sent to the application over HTTP/1),
// content-length, and the hop-by-hop fields an HTTP/2 request can still
// carry. It runs on the server's read loop and allocates nothing.
func AcceptGRPC(fields []hpack.HeaderField) bool {
	post, grpc := false, false
	for _, f := range fields {
		switch f.Name {
		case ":method":
			post = f.Value == http.MethodPost
		case ":path":
			if !plainPath(f.Value) {
				return false
			}
		case "content-type":
			if grpc {
				return false // a second one
			}
			grpc = f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+")
			if !grpc {
				return false
			}
		case "l5d-orig-proto", "content-length", "trailer", "proxy-authenticate", "proxy-authorization", "http2-settings":
			return false
		}
	}
	return post && grpc
}

// plainPath reports whether a :path is made only of characters a URL
// path keeps as they are (so that it is its own escaped form, as the
// http path's httpcore.EscapedPath reads it) and has no query.
func plainPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '/', c == '.', c == '-', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

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
	fields := c.st.Fields()
	out := fields[:0]
	for _, f := range fields {
		if !httpcore.IsMeshHeader(f.Name) {
			out = append(out, f)
		}
	}
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
	st := c.st
	defer resp.Body.Close()
	gs := fieldValue(resp.Fields, "grpc-status")
	failure := route.Failure(c.classes, resp.Status, gs)
	c.stats.Head(resp.Status)
	if c.tr != nil {
		c.tr.ResponseInit(resp.Status, fieldHeader(resp.Fields), true)
	}
	fields := relayedFields(resp.Fields)
	only, n, err := copyFrames(st, resp, fields)
	var trailers []hpack.HeaderField
	if err == nil && !only {
		trailers = relayedFields(resp.Trailers.Trailers())
	}
	if tgs := fieldValue(trailers, "grpc-status"); tgs != "" {
		gs = tgs
		failure = route.Failure(c.classes, resp.Status, gs)
	}
	if err != nil {
		c.stats.Done(resp.Status, gs, true, httpcore.StreamErrorClass(err))
		tap.End(&c.tr, n, -1, httpcore.StreamResetCode(err), nil)
		if errors.Is(err, httpcore.ErrUpstreamBody) {
			st.Reset(http2.ErrCodeInternal) // as httpcore.Abort on the http path
		}
		return
	}
	c.stats.Done(resp.Status, gs, failure, "")
	var th http.Header
	if c.tr != nil && len(trailers) > 0 {
		th = fieldHeader(trailers)
	}
	tap.End(&c.tr, n, tap.GRPCStatus(gs), -1, th)
	if only {
		_ = st.WriteHeader(resp.Status, fields, true)
	} else {
		_ = st.End(trailers)
	}
}

// copyFrames writes the response head (fields) and body to st, but for
// the last block: only says the response is its head alone (END_STREAM
// on it, trailers-only for gRPC), else the trailers are to end it. It
// returns the body bytes written and the first error, as CopyResponse
// names them: ErrClientGone when writing to the client failed,
// ErrUpstreamBody when reading the upstream body did.
func copyFrames(st FrameStream, resp *FieldResponse, fields []hpack.HeaderField) (only bool, written uint64, err error) {
	bufp, put := httpcore.BodyBuf(-1)
	defer put(bufp)
	buf := *bufp
	n, rerr := resp.Body.Read(buf)
	if n == 0 && rerr == io.EOF && len(resp.Trailers.Trailers()) == 0 {
		return true, 0, nil
	}
	if err := st.WriteHeader(resp.Status, fields, false); err != nil {
		return false, 0, fmt.Errorf("%w: %w", httpcore.ErrClientGone, err)
	}
	for {
		if n > 0 {
			if err := st.Write(buf[:n]); err != nil {
				return false, written, fmt.Errorf("%w: %w", httpcore.ErrClientGone, err)
			}
			written += uint64(n)
		}
		if rerr == io.EOF {
			return false, written, nil
		}
		if rerr != nil {
			return false, written, fmt.Errorf("%w: %w", httpcore.ErrUpstreamBody, rerr)
		}
		if !httpcore.ReadReady(resp.Body) {
			if err := st.Flush(); err != nil {
				return false, written, fmt.Errorf("%w: %w", httpcore.ErrClientGone, err)
			}
		}
		n, rerr = resp.Body.Read(buf)
	}
}

// relayedFields edits response fields or trailers in place into what the
// client gets, as CopyResponse's header and trailer hygiene: no mesh
// fields, no hop-by-hop fields (a TE other than "trailers" included).
func relayedFields(fields []hpack.HeaderField) []hpack.HeaderField {
	out := fields[:0]
	for _, f := range fields {
		switch f.Name {
		case "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
			"trailer", "transfer-encoding", "upgrade", "http2-settings":
			continue
		case "te":
			if f.Value != "trailers" {
				continue
			}
		}
		if !httpcore.IsMeshHeader(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// answerFrames writes the proxy's own answer: a trailers-only response.
func (c *inboundCall) answerFrames(status int, fields []hpack.HeaderField) {
	_ = c.st.WriteHeader(http.StatusOK, fields, true)
	if c.tr != nil {
		c.tr.ResponseInit(status, fieldHeader(fields), true)
	}
}

// fieldValue returns the first value of the field name, "" without one.
func fieldValue(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// fieldHeader builds the http.Header view of fields (canonical keys,
// values in order), for what reads one: header matches of the policy, a
// tap that took the request.
func fieldHeader(fields []hpack.HeaderField) http.Header {
	h := make(http.Header, len(fields))
	for _, f := range fields {
		k := http.CanonicalHeaderKey(f.Name)
		h[k] = append(h[k], f.Value)
	}
	return h
}

// frameRequest is the http.Request view of a frame-path request that an
// open tap reads (method, authority, path, header, HTTP/2).
func (c *inboundCall) frameRequest() *http.Request {
	st := c.st
	return &http.Request{Method: st.Method(), Host: st.Authority(), URL: &url.URL{Path: st.Path()},
		Header: fieldHeader(st.Fields()), Proto: "HTTP/2.0", ProtoMajor: 2, RequestURI: st.Path()}
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
