package h2server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// respBufSize is how much response body a handler's writes gather before
// they become DATA frames: one frame of the protocol's minimum size.
const respBufSize = 16 << 10

var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, respBufSize); return &b }}

// responseWriter is a handler's http.ResponseWriter. The header is
// encoded when the first DATA leaves (Flush, a full buffer) or when the
// handler returns, so that a handler that returns without a body sends
// one HEADERS frame with END_STREAM (a gRPC trailers-only response).
type responseWriter struct {
	s      *stream
	c      *conn
	req    *http.Request
	header http.Header

	status      int
	wroteHeader bool // the handler chose its status
	sentHeader  bool // HEADERS encoded
	done        bool // the handler returned
	bodyless    bool
	clen        int64 // declared Content-Length, or -1
	written     int64
	buf         *[]byte
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.done || w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("h2server: invalid WriteHeader code %v", code))
	}
	if code < 200 {
		if code == http.StatusSwitchingProtocols {
			return // no such thing in HTTP/2
		}
		w.c.mu.Lock()
		if w.s.err == nil {
			w.c.writeHeadersLocked(w.s, code, w.header, false)
			_ = w.c.flushLocked()
		}
		w.c.mu.Unlock()
		return
	}
	w.wroteHeader, w.status = true, code
	w.bodyless = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.clen = n
		} else {
			w.header.Del("Content-Length")
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errStreamClosed
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.req.Method == http.MethodHead {
		return len(p), nil // a HEAD response's body is dropped, as net/http does
	}
	if w.bodyless {
		return 0, http.ErrBodyNotAllowed
	}
	if w.clen >= 0 && w.written+int64(len(p)) > w.clen {
		return 0, http.ErrContentLength
	}
	if w.buf == nil {
		if len(p) >= respBufSize {
			return w.writeDirect(p)
		}
		w.buf = respBufs.Get().(*[]byte)
	}
	b := *w.buf
	if len(b)+len(p) <= respBufSize {
		*w.buf = append(b, p...)
		w.written += int64(len(p))
		return len(p), nil
	}
	return w.writeDirect(p)
}

// writeDirect frames what is buffered and p.
func (w *responseWriter) writeDirect(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := w.sendLocked(false); err != nil {
		return 0, err
	}
	if err := c.writeDataLocked(w.s, p, false); err != nil {
		return 0, err
	}
	w.written += int64(len(p))
	return len(p), nil
}

// WriteString avoids a conversion for io.WriteString.
func (w *responseWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush sends the header and what is buffered now.
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush reporting whether the stream is still writable.
func (w *responseWriter) FlushError() error {
	if w.done {
		return errStreamClosed
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := w.sendLocked(false); err != nil {
		return err
	}
	return c.flushLocked()
}

// sendLocked encodes the header (once) and the buffered body; end ends
// the stream with them when there are no trailers.
func (w *responseWriter) sendLocked(end bool) error {
	s, c := w.s, w.c
	if s.err != nil {
		return s.err
	}
	var data []byte
	if w.buf != nil {
		data = *w.buf
	}
	if !w.sentHeader {
		// The queue is bounded before the header joins it, as before
		// each DATA frame.
		if err := c.backpressureLocked(); err != nil {
			return err
		}
		if s.err != nil {
			return s.err
		}
		w.sentHeader = true
		c.writeHeadersLocked(s, w.status, w.header, end && len(data) == 0)
		if end && len(data) == 0 {
			s.endLocalLocked()
			return nil
		}
	}
	if len(data) > 0 || end {
		err := c.writeDataLocked(s, data, end)
		if w.buf != nil {
			*w.buf = (*w.buf)[:0]
		}
		if err != nil {
			return err
		}
	}
	if end {
		s.endLocalLocked()
	}
	return nil
}

// finishLocked completes the response when the handler returns: header,
// body, trailers, END_STREAM, one flush.
func (w *responseWriter) finishLocked() {
	c, s := w.c, w.s
	defer func() {
		w.done = true
		if w.buf != nil {
			*w.buf = (*w.buf)[:0]
			respBufs.Put(w.buf)
			w.buf = nil
		}
	}()
	if s.err != nil {
		return
	}
	if !w.wroteHeader {
		w.wroteHeader, w.status = true, http.StatusOK
	}
	if !w.sentHeader {
		// The whole body is known: declare its length, as net/http's
		// servers do.
		n := 0
		if w.buf != nil {
			n = len(*w.buf)
		}
		_, has := w.header["Content-Length"]
		if !has && bodyAllowed(w.status) && (n > 0 || w.req.Method != http.MethodHead) {
			w.header["Content-Length"] = []string{strconv.Itoa(n)}
		}
	}
	trailers := w.trailers()
	if err := w.sendLocked(len(trailers) == 0); err != nil {
		return
	}
	if len(trailers) > 0 {
		c.writeFieldsLocked(s, trailers, true)
		s.endLocalLocked()
	}
	if cap(trailers) <= 64 {
		clear(trailers) // keep no values alive past this response
		c.trailerBuf = trailers[:0]
	}
	_ = c.flushLocked()
}

func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

// trailers collects the trailers the handler set: keys declared in the
// Trailer header, and keys with http.TrailerPrefix.
func (w *responseWriter) trailers() []hpack.HeaderField {
	// The connection's scratch slice, taken (mu held) so that another
	// handler finishing while this one waits for window gets its own.
	out := w.c.trailerBuf[:0]
	w.c.trailerBuf = nil
	for _, v := range w.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			k = http.CanonicalHeaderKey(strings.TrimSpace(k))
			for _, vv := range w.header[k] {
				out = w.c.appendField(out, k, vv)
			}
		}
	}
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			for _, v := range vs {
				out = w.c.appendField(out, name, v)
			}
		}
	}
	return out
}

// appendField appends a header field if it may be sent in HTTP/2.
func (c *conn) appendField(out []hpack.HeaderField, k, v string) []hpack.HeaderField {
	if !httpguts.ValidHeaderFieldName(k) || !httpguts.ValidHeaderFieldValue(v) {
		return out
	}
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
		return out
	case "Te":
		if v != "trailers" {
			return out
		}
	}
	return append(out, hpack.HeaderField{Name: c.lowerName(k), Value: v})
}

// lowerName is a response header's name on the wire (mu held).
func (c *conn) lowerName(k string) string { return cachedName(c.lower, k, strings.ToLower) }

// writeHeadersLocked encodes a response header block: the status and
// the header's fields, leaving out trailers (declared or prefixed).
func (c *conn) writeHeadersLocked(s *stream, status int, h http.Header, end bool) {
	c.hbuf.b = c.hbuf.b[:0]
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: strconv.Itoa(status)})
	declared := h["Trailer"]
	for k, vs := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) || len(declared) > 0 && isDeclared(declared, k) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
			continue
		}
		name := c.lowerName(k)
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) || k == "Te" && v != "trailers" {
				continue
			}
			_ = c.henc.WriteField(hpack.HeaderField{Name: name, Value: v})
		}
	}
	c.writeBlockLocked(s.id, end)
}

func isDeclared(declared []string, k string) bool {
	for _, v := range declared {
		for _, d := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), k) {
				return true
			}
		}
	}
	return false
}

// writeFieldsLocked encodes a trailer block.
func (c *conn) writeFieldsLocked(s *stream, fields []hpack.HeaderField, end bool) {
	c.hbuf.b = c.hbuf.b[:0]
	for _, f := range fields {
		_ = c.henc.WriteField(f)
	}
	c.writeBlockLocked(s.id, end)
}

// writeBlockLocked frames the encoded block in c.hbuf: HEADERS, then
// CONTINUATION frames when it exceeds the client's frame size.
func (c *conn) writeBlockLocked(id uint32, end bool) {
	block := c.hbuf.b
	first := block[:min(len(block), c.peerFrame)]
	rest := block[len(first):]
	_ = c.wf.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(len(rest), c.peerFrame)
		_ = c.wf.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	if len(c.hbuf.b) > 64<<10 {
		c.hbuf.b = nil
	}
}

// writeDataLocked frames p as DATA within the send windows, waiting for
// window when there is none; end sets END_STREAM on the last frame.
func (c *conn) writeDataLocked(s *stream, p []byte, end bool) error {
	for {
		if s.err != nil {
			return s.err
		}
		if c.werr != nil {
			return c.werr
		}
		if len(p) == 0 {
			if end {
				_ = c.wf.WriteData(s.id, true, nil)
			}
			return nil
		}
		if len(c.out) >= highWater {
			// Others' frames fill the queue: wait before adding.
			if err := c.backpressureLocked(); err != nil {
				return err
			}
			continue
		}
		n := min(int64(len(p)), s.sendWin, c.sendWin, int64(c.peerFrame))
		if n <= 0 {
			// The client must see what is queued before it grants more.
			// Flushing releases mu: a WINDOW_UPDATE may arrive meanwhile,
			// so look again before waiting.
			if len(c.out) > 0 && !c.flushing {
				if err := c.flushLocked(); err != nil {
					return err
				}
				continue
			}
			s.waitingWin = true
			s.cond.Wait()
			s.waitingWin = false
			continue
		}
		s.sendWin -= n
		c.sendWin -= n
		_ = c.wf.WriteData(s.id, end && int(n) == len(p), p[:n])
		c.dataSentLocked()
		p = p[n:]
		if len(p) == 0 {
			return c.backpressureLocked()
		}
		if err := c.backpressureLocked(); err != nil {
			return err
		}
	}
}
