package h2client

import (
	"context"
	"io"
	"net/http"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http2/hpack"
)

// FieldRequest is a request given as its header fields, for a relay that
// has them decoded already (a proxy's frame-level server side): no
// http.Request or header map is built, and the response comes back the
// same way ([FieldResponse]).
type FieldRequest struct {
	// Method, Scheme, Authority and Path are the pseudo-header fields,
	// checked as an http.Request's are (Method defaults to GET, Scheme
	// to https; CONNECT is not supported).
	Method, Scheme, Authority, Path string
	// Fields are the regular fields, names in lower case. Host,
	// Content-Length, Trailer, the connection-specific fields and a TE
	// other than "trailers" are left out, as from an http.Request's
	// header; a name that is not a lower-case token or an invalid value
	// fails the request.
	Fields []hpack.HeaderField
	// Body is sent as RoundTrip sends an http.Request's (all at once
	// when its ReadReady says it is there, else by a goroutine); nil for
	// none. It is closed when sent or on failure. Request trailers are
	// not supported.
	Body io.ReadCloser
}

// FieldResponse is the response to a RoundTripFields request.
type FieldResponse struct {
	Status int
	// Fields are the response's regular header fields as received
	// (lower-case names), a copy the caller owns.
	Fields []hpack.HeaderField
	// Body is the response body, bounded as RoundTrip's (the stream
	// window and the connection's buffer limit); it has ReadReady too,
	// returns io.EOF with the last bytes, and resets the stream (CANCEL)
	// when closed before the end.
	Body io.ReadCloser

	cs *stream
}

// Trailers returns the response's trailer fields once Body returned
// io.EOF (nil before, and for a response without trailers).
func (r *FieldResponse) Trailers() []hpack.HeaderField {
	cs := r.cs
	cs.cc.mu.Lock()
	defer cs.cc.mu.Unlock()
	if !cs.recvEnded || cs.off != len(cs.buf) {
		return nil
	}
	return cs.trailerFields
}

// RoundTripFields sends r and returns the response once its header
// arrives, as RoundTrip does (the same stream limits, windows, buffer
// limit and errors, [ErrUnprocessed] included); ctx cancels the stream.
// Informational (1xx) responses are counted and skipped.
func (cc *Conn) RoundTripFields(ctx context.Context, r *FieldRequest) (*FieldResponse, error) {
	cs := &stream{cc: cc, freq: r, head: r.Method == http.MethodHead}
	if err := cc.start(cs, ctx, r.Body); err != nil {
		return nil, err
	}
	if _, err := cc.awaitResponse(cs); err != nil {
		return nil, err
	}
	return &cs.fresp, nil
}

// onFieldResponse handles a RoundTripFields response head (code is
// checked), or skips an informational one.
func (cc *Conn) onFieldResponse(cs *stream, f *h2hdr.Block, code int) {
	if code < 200 {
		cc.onInformational(cs, f, code, nil)
		return
	}
	cs.fresp = FieldResponse{Status: code, Fields: append([]hpack.HeaderField(nil), f.RegularFields()...), cs: cs}
	if f.StreamEnded() || cs.head {
		cs.fresp.Body = http.NoBody
	} else {
		cs.respBody = body{cs: cs}
		cs.fresp.Body = &cs.respBody
	}
	cc.mu.Lock()
	// What the read loop looks at to know the head has come.
	cs.respVal = http.Response{StatusCode: code}
	cs.resp = &cs.respVal
	if f.StreamEnded() {
		cs.recvEnded = true
		cc.maybeRemoveLocked(cs)
	}
	if cs.head {
		cs.bodyDone = true
	}
	cs.cond.Broadcast()
	cc.mu.Unlock()
}
