package h2client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// bodyChunk is the size of the buffers request bodies are read into.
const bodyChunk = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, bodyChunk); return &b }}

func getBuf() *[]byte  { return bufPool.Get().(*[]byte) }
func putBuf(b *[]byte) { *b = (*b)[:0]; bufPool.Put(b) }

// errHeaderListSize is returned when the request's headers exceed the
// server's SETTINGS_MAX_HEADER_LIST_SIZE.
var errHeaderListSize = errors.New("h2client: request headers exceed the server's header list limit")

// reqHeaders is a request checked and ready to encode.
type reqHeaders struct {
	req           *http.Request
	freq          *FieldRequest // instead of req (RoundTripFields)
	method        string
	scheme        string
	authority     string
	path          string
	contentLength string
	trailerNames  string
}

// encodeRequest checks req and what will be sent of it: the pseudo-header
// fields, then its header fields without the connection-specific ones
// (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding, Upgrade,
// and TE other than "trailers"), Host and Content-Length (sent from
// req.ContentLength), and a "trailer" field naming req.Trailer's keys.
func (cc *Conn) encodeRequest(h *reqHeaders, req *http.Request, hasBody bool) error {
	if req.URL == nil {
		return errors.New("h2client: request without URL")
	}
	*h = reqHeaders{req: req, method: req.Method, scheme: req.URL.Scheme}
	h.authority = req.Host
	if h.authority == "" {
		h.authority = req.URL.Host
	}
	h.path = req.URL.RequestURI()
	for _, bad := range []string{"Upgrade", "Transfer-Encoding", "Connection"} {
		if vv := req.Header[bad]; len(vv) > 0 && !allowedConnValue(bad, vv) {
			return fmt.Errorf("h2client: invalid %s request header %q", bad, vv)
		}
	}
	if err := h.check(); err != nil {
		return err
	}
	switch {
	case hasBody && req.ContentLength > 0:
		h.contentLength = strconv.FormatInt(req.ContentLength, 10)
	case !hasBody && (h.method == http.MethodPost || h.method == http.MethodPut || h.method == http.MethodPatch):
		h.contentLength = "0"
	}
	if len(req.Trailer) > 0 {
		var sb strings.Builder
		for k := range req.Trailer {
			if !httpguts.ValidTrailerHeader(k) || !httpguts.ValidHeaderFieldName(k) {
				return fmt.Errorf("h2client: invalid request trailer %q", k)
			}
			if sb.Len() > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(lower(k))
		}
		h.trailerNames = sb.String()
	}
	return cc.checkSize(h)
}

// check checks the pseudo-header fields of a request of either kind,
// filling in the defaults (GET, https) and the authority's ASCII form.
func (h *reqHeaders) check() error {
	if a, err := httpguts.PunycodeHostPort(h.authority); err == nil {
		h.authority = a
	}
	if !httpguts.ValidHostHeader(h.authority) {
		return fmt.Errorf("h2client: invalid request authority %q", h.authority)
	}
	if h.method == "" {
		h.method = http.MethodGet
	}
	if !validToken(h.method) {
		return fmt.Errorf("h2client: invalid request method %q", h.method)
	}
	if h.method == http.MethodConnect {
		return errors.New("h2client: CONNECT is not supported")
	}
	if h.path == "" || h.path[0] != '/' && h.path != "*" {
		return fmt.Errorf("h2client: invalid request path %q", h.path)
	}
	if h.scheme == "" {
		h.scheme = "https"
	}
	return nil
}

// checkSize checks the fields' names and values and their size against
// the server's SETTINGS_MAX_HEADER_LIST_SIZE.
func (cc *Conn) checkSize(h *reqHeaders) error {
	var size uint64
	err := h.fields(func(name, value string) {
		size += uint64(len(name) + len(value) + 32)
	})
	if err != nil {
		return err
	}
	cc.mu.Lock()
	limit := cc.peerMaxHeader
	cc.mu.Unlock()
	if limit != 0 && size > uint64(limit) {
		return errHeaderListSize
	}
	return nil
}

// encodeFieldRequest checks a RoundTripFields request as encodeRequest
// checks an http.Request: the same pseudo-header checks, and its fields
// without those a client may not send (regularField).
func (cc *Conn) encodeFieldRequest(h *reqHeaders, r *FieldRequest, hasBody bool) error {
	*h = reqHeaders{freq: r, method: r.Method, scheme: r.Scheme, authority: r.Authority, path: r.Path}
	if err := h.check(); err != nil {
		return err
	}
	if !hasBody && (h.method == http.MethodPost || h.method == http.MethodPut || h.method == http.MethodPatch) {
		h.contentLength = "0"
	}
	return cc.checkSize(h)
}

func allowedConnValue(name string, vv []string) bool {
	if len(vv) > 1 {
		return false
	}
	switch name {
	case "Transfer-Encoding":
		return vv[0] == "" || vv[0] == "chunked"
	case "Connection":
		return vv[0] == "" || strings.EqualFold(vv[0], "close") || strings.EqualFold(vv[0], "keep-alive")
	}
	return vv[0] == ""
}

// fields calls f with each field to send, checking names and values.
func (h *reqHeaders) fields(f func(name, value string)) error {
	f(":authority", h.authority)
	f(":method", h.method)
	f(":path", h.path)
	f(":scheme", h.scheme)
	if h.trailerNames != "" {
		f("trailer", h.trailerNames)
	}
	if h.freq != nil {
		for _, hf := range h.freq.Fields {
			send, err := regularField(hf.Name, hf.Value)
			if err != nil {
				return err
			}
			if send {
				f(hf.Name, hf.Value)
			}
		}
		if h.contentLength != "" {
			f("content-length", h.contentLength)
		}
		return nil
	}
	for k, vv := range h.req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h2client: invalid request header name %q", k)
		}
		switch {
		case strings.EqualFold(k, "host"), strings.EqualFold(k, "content-length"),
			strings.EqualFold(k, "connection"), strings.EqualFold(k, "proxy-connection"),
			strings.EqualFold(k, "transfer-encoding"), strings.EqualFold(k, "upgrade"),
			strings.EqualFold(k, "keep-alive"), strings.EqualFold(k, "trailer"):
			continue
		case strings.EqualFold(k, "user-agent"):
			// One value at most; an empty one means none (no default).
			if len(vv) == 0 || vv[0] == "" {
				continue
			}
			vv = vv[:1]
		}
		name := lower(k)
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h2client: invalid value for request header %q", k)
			}
			switch {
			case name == "te" && !strings.EqualFold(v, "trailers"):
				// RFC 9113 8.2.2: TE may only say "trailers".
			case name == "cookie":
				// One field per cookie pair compresses better
				// (RFC 9113 8.2.3); servers join them again.
				for v != "" {
					var pair string
					pair, v, _ = strings.Cut(v, ";")
					v = strings.TrimLeft(v, " ")
					if pair != "" {
						f(name, pair)
					}
				}
			default:
				f(name, v)
			}
		}
	}
	if h.contentLength != "" {
		f("content-length", h.contentLength)
	}
	return nil
}

// regularField reports whether a RoundTripFields field is sent: its
// name must be a lower-case token and its value valid (else an error);
// the fields encodeRequest leaves out of an http.Request's header are
// left out (Host, Content-Length, the connection-specific ones, Trailer,
// a TE other than "trailers"), and pseudo-header fields are an error.
func regularField(name, value string) (bool, error) {
	if !httpguts.ValidHeaderFieldName(name) || lower(name) != name {
		return false, fmt.Errorf("h2client: invalid request header name %q", name)
	}
	if !httpguts.ValidHeaderFieldValue(value) {
		return false, fmt.Errorf("h2client: invalid value for request header %q", name)
	}
	switch name {
	case "host", "content-length", "connection", "proxy-connection", "transfer-encoding", "upgrade", "keep-alive", "trailer":
		return false, nil
	case "te":
		return strings.EqualFold(value, "trailers"), nil
	}
	return true, nil
}

// encodeHeaderBlock HPACK-encodes h; called with wmu held.
func (cc *Conn) encodeHeaderBlock(h *reqHeaders) ([]byte, error) {
	cc.hbuf.b = cc.hbuf.b[:0]
	err := h.fields(func(name, value string) {
		_ = cc.henc.WriteField(hpack.HeaderField{Name: name, Value: value})
	})
	return cc.hbuf.b, err
}

// writeHeaderBlock writes a header block as HEADERS and CONTINUATION
// frames of at most maxFrame bytes; called with wmu held.
func (cc *Conn) writeHeaderBlock(id uint32, block []byte, end bool, maxFrame int) error {
	first := true
	for first || len(block) > 0 {
		chunk := block[:min(len(block), maxFrame)]
		block = block[len(chunk):]
		var err error
		if first {
			err = cc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: chunk, EndStream: end, EndHeaders: len(block) == 0})
			first = false
		} else {
			err = cc.fr.WriteContinuation(id, len(block) == 0, chunk)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeDataLocked queues as much of data as the flow-control windows
// allow, with END_STREAM (or the trailers) after the last byte when eof.
// It reports how much was queued and whether the stream's sending side is
// done (ended, or reset meanwhile). Called with wmu held.
func (cc *Conn) writeDataLocked(cs *stream, data []byte, eof bool, maxFrame int) (int, bool, error) {
	cc.mu.Lock()
	if cs.reset || cc.closed {
		cc.mu.Unlock()
		return 0, true, nil
	}
	n := int(min(int64(len(data)), cc.sendWin, cs.sendWin))
	n = max(n, 0)
	cc.sendWin -= int64(n)
	cs.sendWin -= int64(n)
	trailers := eof && n == len(data) && cs.req != nil && hasTrailers(cs.req)
	end := eof && n == len(data) && !trailers
	if maxFrame <= 0 || maxFrame > int(cc.peerMaxFrame) {
		maxFrame = int(cc.peerMaxFrame)
	}
	cc.mu.Unlock()
	if n == 0 && end {
		if err := cc.fr.WriteData(cs.id, true, nil); err != nil {
			return 0, true, err
		}
	}
	for off := 0; off < n; {
		m := min(n-off, maxFrame)
		if err := cc.fr.WriteData(cs.id, end && off+m == n, data[off:off+m]); err != nil {
			return off, true, err
		}
		off += m
	}
	if trailers {
		block, empty := cc.encodeTrailers(cs.req.Trailer)
		var err error
		if empty {
			err = cc.fr.WriteData(cs.id, true, nil)
		} else {
			err = cc.writeHeaderBlock(cs.id, block, true, maxFrame)
		}
		if err != nil {
			return n, true, err
		}
		end = true
	}
	if end {
		cc.mu.Lock()
		cs.sentEnd = true
		cc.maybeRemoveLocked(cs)
		cc.mu.Unlock()
	}
	return n, end, nil
}

// encodeTrailers HPACK-encodes the trailers that have values; called with
// wmu held.
func (cc *Conn) encodeTrailers(tr http.Header) ([]byte, bool) {
	cc.hbuf.b = cc.hbuf.b[:0]
	empty := true
	for k, vv := range tr {
		name := lower(k)
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				continue
			}
			empty = false
			_ = cc.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
	return cc.hbuf.b, empty
}

// sendBody streams the rest of a request body (pending first, then
// what body reads), waiting for flow-control windows; it runs on its own
// goroutine once the headers are out.
func (cc *Conn) sendBody(cs *stream, body io.ReadCloser, pending []byte, ended bool) {
	bufp := getBuf()
	defer putBuf(bufp)
	defer cs.closeReqBody()
	cc.mu.Lock()
	cs.reqBody = body
	gone := cs.reset
	cc.mu.Unlock()
	if gone {
		return
	}
	buf := (*bufp)[:cap(*bufp)]
	for {
		if len(pending) == 0 && !ended {
			n, err := body.Read(buf)
			pending = buf[:n]
			switch {
			case err == io.EOF:
				ended = true
			case err != nil:
				cc.failStream(cs, fmt.Errorf("h2client: reading the request body: %w", err), http2.ErrCodeCancel)
				return
			}
		}
		if len(pending) > 0 && !cc.waitWindow(cs) {
			return
		}
		if err := cc.lockWrite(); err != nil {
			cc.failStream(cs, fmt.Errorf("h2client: connection lost: %w", err), http2.ErrCodeCancel)
			return
		}
		sent, done, err := cc.writeDataLocked(cs, pending, ended, 0)
		cc.flushLocked()
		if err != nil {
			cc.failStream(cs, err, http2.ErrCodeInternal)
			return
		}
		if done {
			return
		}
		pending = pending[sent:]
	}
}

// waitWindow waits until the stream may send at least one byte; it
// reports false when the stream or connection ended meanwhile.
func (cc *Conn) waitWindow(cs *stream) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for (cc.sendWin <= 0 || cs.sendWin <= 0) && !cs.reset && !cc.closed {
		cc.cond.Wait()
	}
	return !cs.reset && !cc.closed
}

// closeReqBody closes the request body once (from sendBody when done, or
// when the stream is reset, to unblock a Read).
func (cs *stream) closeReqBody() {
	cs.cc.mu.Lock()
	b := cs.reqBody
	cs.reqBody = nil
	cs.cc.mu.Unlock()
	if b != nil {
		b.Close()
	}
}

// validToken reports whether s is an HTTP token (a method).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !httpguts.IsTokenRune(rune(s[i])) {
			return false
		}
	}
	return true
}

// commonLower maps canonical header keys the proxy sends often to their
// lower case, so that the hot path does not allocate.
var commonLower = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Content-Encoding", "Content-Type", "Cookie", "Date", "Etag", "Grpc-Accept-Encoding",
		"Grpc-Encoding", "Grpc-Timeout", "Grpc-Message", "Grpc-Status", "If-None-Match",
		"L5d-Dst-Canonical", "L5d-Client-Id", "L5d-Orig-Proto", "L5d-Proxy-Error",
		"Origin", "Referer", "Te", "User-Agent", "X-Forwarded-For", "X-Request-Id",
		"Traceparent", "Tracestate",
	} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

func lower(k string) string {
	if v, ok := commonLower[k]; ok {
		return v
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(k)
		}
	}
	return k
}
