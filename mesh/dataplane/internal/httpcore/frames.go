package httpcore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The frame path's shared vocabulary: a gRPC call relayed from the
// header fields and DATA the proxy's HTTP/2 server decoded to its HTTP/2
// client, without an http.Request, header maps or an
// http.ResponseWriter (issue 28 item 3). The inbound side (a peer's call
// for the local application) and the outbound side (the application's
// call to a Service) both take it for what AcceptGRPC takes.

// FrameStream is a request served at frame level: the proxy's HTTP/2
// server's Stream (h2server.Stream), which the HTTP sides do not link.
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

// FieldRequest is a request sent in header fields (the HTTP/2 client's
// RoundTripFields).
type FieldRequest struct {
	Method, Authority, Path string
	Fields                  []hpack.HeaderField
	Body                    io.ReadCloser
}

// FieldResponse is the answer to a FieldRequest: its status and fields,
// its body, and what has its trailers once the body ended (the HTTP/2
// client's response: an interface, not a method value, so that nothing
// is allocated for it).
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
// http path's EscapedPath reads it) and has no query.
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

// CopyFrames writes the response head (fields) and body to st, but for
// the last block: only says the response is its head alone (END_STREAM
// on it, trailers-only for gRPC), else the trailers are to end it. As
// CopyResponse, the head waits for the first read of the body, and what
// has arrived is flushed when no more is ready; touch (nil for none) is
// called as bytes move. It returns the body bytes written and the first
// error, as CopyResponse names them: ErrClientGone when writing to the
// client failed, ErrUpstreamBody when reading the upstream body did.
func CopyFrames(st FrameStream, resp *FieldResponse, fields []hpack.HeaderField, touch func()) (only bool, written uint64, err error) {
	bufp, put := BodyBuf(-1)
	defer put(bufp)
	buf := *bufp
	n, rerr := resp.Body.Read(buf)
	if n == 0 && rerr == io.EOF && len(resp.Trailers.Trailers()) == 0 {
		return true, 0, nil
	}
	if err := st.WriteHeader(resp.Status, fields, false); err != nil {
		return false, 0, fmt.Errorf("%w: %w", ErrClientGone, err)
	}
	for {
		if n > 0 {
			if touch != nil {
				touch()
			}
			if err := st.Write(buf[:n]); err != nil {
				return false, written, fmt.Errorf("%w: %w", ErrClientGone, err)
			}
			written += uint64(n)
		}
		if rerr == io.EOF {
			return false, written, nil
		}
		if rerr != nil {
			return false, written, fmt.Errorf("%w: %w", ErrUpstreamBody, rerr)
		}
		if !ReadReady(resp.Body) {
			if err := st.Flush(); err != nil {
				return false, written, fmt.Errorf("%w: %w", ErrClientGone, err)
			}
		}
		n, rerr = resp.Body.Read(buf)
	}
}

// RelayedFields edits response fields or trailers in place into what the
// client gets, as CopyResponse's header and trailer hygiene: no
// hop-by-hop fields (a TE other than "trailers" included) and no mesh
// fields, but for l5d-proxy-error and weft-deny-reason when keep is set
// (a peer proxy's explanation of its own answer, as
// CleanResponseHeader keeps them).
func RelayedFields(fields []hpack.HeaderField, keep bool) []hpack.HeaderField {
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
		case "l5d-proxy-error", "weft-deny-reason":
			if keep {
				out = append(out, f)
				continue
			}
		}
		if !IsMeshHeader(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// WithoutMeshFields edits request fields in place: no mesh fields (l5d-*,
// weft-*), as RemoveMeshHeaders on the http path.
func WithoutMeshFields(fields []hpack.HeaderField) []hpack.HeaderField {
	out := fields[:0]
	for _, f := range fields {
		if !IsMeshHeader(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// FieldValue returns the first value of the field name, "" without one.
func FieldValue(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// FieldHeader builds the http.Header view of fields (canonical keys,
// values in order), for what reads one: header matches, header filters,
// a tap that took the request.
func FieldHeader(fields []hpack.HeaderField) http.Header {
	h := make(http.Header, len(fields))
	for _, f := range fields {
		k := http.CanonicalHeaderKey(f.Name)
		h[k] = append(h[k], f.Value)
	}
	return h
}

// HeaderFields appends h to fields, names in lower case: what a header
// edited by a route's filters sends (its order is the map's).
func HeaderFields(fields []hpack.HeaderField, h http.Header) []hpack.HeaderField {
	for k, vs := range h {
		name := strings.ToLower(k)
		for _, v := range vs {
			fields = append(fields, hpack.HeaderField{Name: name, Value: v})
		}
	}
	return fields
}

// FrameRequest is the http.Request view of a frame-path request with
// the given fields (the stream's, or what the proxy made of them in
// place) that an open tap reads (method, authority, path, header,
// HTTP/2).
func FrameRequest(st FrameStream, fields []hpack.HeaderField) *http.Request {
	return &http.Request{Method: st.Method(), Host: st.Authority(), URL: &url.URL{Path: st.Path()},
		Header: FieldHeader(fields), Proto: "HTTP/2.0", ProtoMajor: 2, RequestURI: st.Path()}
}
