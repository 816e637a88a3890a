package h2server

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// StreamHandler serves requests at frame level, without an http.Request
// or http.ResponseWriter: the handler reads the request's header fields
// and body as they arrived and writes the response's fields, DATA and
// trailers. A relay (a gRPC call on its way to the application) then
// builds nothing it does not forward.
//
// Only what a request is handed over differs: its HEADERS block passed
// the checks every request passes (checkRequest), it counts against the
// same stream and handler limits, starts its handler at the same time
// (workers.go), and its body and response go through the same windows,
// buffers and output queue as a ResponseWriter's.
type StreamHandler struct {
	// Accept says, on the connection's read loop, whether Serve takes a
	// request, given its decoded header fields (pseudo-header fields
	// first, every name in lower case). It must return at once and must
	// not keep fields. A request it refuses, and one whose header list
	// went over MaxHeaderBytes (answered 431), goes to the http.Handler.
	Accept func(fields []hpack.HeaderField) bool
	// Serve serves one accepted request on the stream's handler
	// goroutine. A response it has not ended (End) when it returns is
	// reset with INTERNAL_ERROR, as a handler that panics is.
	Serve func(st *Stream)
}

// Stream is one request served at frame level. Its methods are for the
// Serve call that got it, on that goroutine; none may be called after
// Serve returns.
type Stream struct {
	s   *stream
	ctx context.Context

	method, scheme, authority, path string
	fields                          []hpack.HeaderField // the request's regular fields, a copy

	trailers []hpack.HeaderField // the request's trailers as received (c.mu)

	sentHeader bool
	ended      bool
}

var (
	errHeaderSent  = errors.New("h2server: response header already sent")
	errNoHeader    = errors.New("h2server: response header not sent")
	errStatus      = errors.New("h2server: response status out of range")
	errStreamEnded = errors.New("h2server: response already ended")
)

// newFrameStream makes the stream of a checked request that Serve takes:
// it copies the regular fields out of the Reader's block, leaving out
// Host (folded into the authority by checkRequest) and an Expect of
// 100-continue (the server answers it, as for any request, when the
// body is first read).
func (c *conn) newFrameStream(f *h2hdr.Block, h *reqHead) *stream {
	s, ctx := c.newStream(f.StreamID, h)
	regular := f.RegularFields()
	st := &Stream{s: s, ctx: ctx, method: h.method, scheme: h.scheme, authority: h.authority, path: h.path,
		fields: make([]hpack.HeaderField, 0, len(regular)+1)} // room for a field a relay adds (l5d-client-id)
	for _, hf := range regular {
		switch {
		case hf.Name == "host":
			continue
		case hf.Name == "expect" && httpguts.HeaderValuesContainsToken([]string{hf.Value}, "100-continue"):
			s.continueDue = !f.StreamEnded()
			continue
		}
		st.fields = append(st.fields, hf)
	}
	if f.StreamEnded() {
		s.remoteDone = true
		s.bodyErr = io.EOF
	}
	s.frame = st
	return s
}

// Context is cancelled when the stream ends: reset by either side, the
// connection gone, or Serve returned.
func (st *Stream) Context() context.Context { return st.ctx }

// Method is the request's :method.
func (st *Stream) Method() string { return st.method }

// Scheme is the request's :scheme.
func (st *Stream) Scheme() string { return st.scheme }

// Authority is the request's :authority, or its Host field's value when
// it had no :authority.
func (st *Stream) Authority() string { return st.authority }

// Path is the request's :path, as received (checked as any request's).
func (st *Stream) Path() string { return st.path }

// Fields returns the request's regular header fields in the order they
// arrived, without Host and an Expect of 100-continue. The slice is the
// stream's own; the caller may edit it.
func (st *Stream) Fields() []hpack.HeaderField { return st.fields }

// Body is the request body, bounded by the stream's window as any
// request's: it also has ReadReady (whether a Read would not block), and
// returns io.EOF with the last bytes once the client ended the stream.
func (st *Stream) Body() io.ReadCloser { return &st.s.body }

// Trailers returns the request's trailer fields, once Body returned
// io.EOF (nil before, and for a request without trailers).
func (st *Stream) Trailers() []hpack.HeaderField {
	c := st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !st.s.remoteDone || st.s.off != len(st.s.buf) {
		return nil
	}
	return st.trailers
}

// WriteHeader queues the response's HEADERS: status (200 to 999) and
// fields, with END_STREAM when end is set. Fields a server may not send
// in HTTP/2 are left out: pseudo-header fields, names that are not
// lower-case tokens, invalid values, connection-specific fields and a TE
// other than "trailers". Nothing is written until Flush, End, or a full
// output queue.
func (st *Stream) WriteHeader(status int, fields []hpack.HeaderField, end bool) error {
	if st.sentHeader {
		return errHeaderSent
	}
	if status < 200 || status > 999 {
		return errStatus
	}
	s, c := st.s, st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	// The queue is bounded before the header joins it, as before each
	// DATA frame.
	if err := c.backpressureLocked(); err != nil {
		return err
	}
	if s.err != nil {
		return s.err
	}
	st.sentHeader = true
	c.hbuf.b = c.hbuf.b[:0]
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	c.encodeFieldsLocked(fields)
	c.writeBlockLocked(s.id, end)
	if end {
		st.ended = true
		s.endLocalLocked()
		return c.flushLocked()
	}
	return nil
}

// Write queues p as DATA, within the stream's and the connection's send
// windows (waiting for window when there is none) and the output queue's
// bound.
func (st *Stream) Write(p []byte) error {
	if !st.sentHeader {
		return errNoHeader
	}
	if st.ended {
		return errStreamEnded
	}
	if len(p) == 0 {
		return nil
	}
	c := st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeDataLocked(st.s, p, false)
}

// Flush writes what is queued.
func (st *Stream) Flush() error {
	s, c := st.s, st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.err != nil && !st.ended {
		return s.err
	}
	return c.flushLocked()
}

// End ends the response, with a trailer block of fields when there are
// any (filtered as WriteHeader's), else with an empty DATA frame, and
// writes what is queued.
func (st *Stream) End(trailers []hpack.HeaderField) error {
	if !st.sentHeader {
		return errNoHeader
	}
	if st.ended {
		return errStreamEnded
	}
	s, c := st.s, st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	st.ended = true
	if len(trailers) > 0 {
		if err := c.backpressureLocked(); err != nil {
			return err
		}
		if s.err != nil {
			return s.err
		}
		c.hbuf.b = c.hbuf.b[:0]
		c.encodeFieldsLocked(trailers)
		c.writeBlockLocked(s.id, true)
	} else if err := c.writeDataLocked(s, nil, true); err != nil {
		return err
	}
	s.endLocalLocked()
	return c.flushLocked()
}

// Reset ends the stream with RST_STREAM and code, unless it has ended.
func (st *Stream) Reset(code http2.ErrCode) {
	s, c := st.s, st.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.ended || s.localDone {
		return
	}
	st.ended = true
	c.resetLocked(s.id, code)
	_ = c.flushLocked()
}

// finishLocked resets a stream whose Serve returned without ending it.
func (st *Stream) finishLocked() {
	s, c := st.s, st.s.c
	if st.ended || s.localDone || s.err != nil {
		return
	}
	st.ended = true
	c.resetLocked(s.id, http2.ErrCodeInternal)
	_ = c.flushLocked()
}

// encodeFieldsLocked HPACK-encodes the fields a server may send into
// c.hbuf.
func (c *conn) encodeFieldsLocked(fields []hpack.HeaderField) {
	for _, f := range fields {
		if !sendableField(f) {
			continue
		}
		_ = c.henc.WriteField(hpack.HeaderField{Name: f.Name, Value: f.Value, Sensitive: f.Sensitive})
	}
}

// sendableField reports whether a handler's field may go on the wire: a
// lower-case token name (no pseudo-header field), a valid value, and not
// a connection-specific field (RFC 9113 section 8.2.2).
func sendableField(f hpack.HeaderField) bool {
	if !httpguts.ValidHeaderFieldName(f.Name) || strings.ToLower(f.Name) != f.Name ||
		!httpguts.ValidHeaderFieldValue(f.Value) {
		return false
	}
	switch f.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "trailer":
		return false
	case "te":
		return f.Value == "trailers"
	}
	return true
}
