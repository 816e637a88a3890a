package h2server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/weftmesh/weft/mesh/dataplane/internal/bodybuf"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2hdr"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// stream is one request/response exchange. Its fields are guarded by
// the connection's mu.
type stream struct {
	c      *conn
	id     uint32
	cond   sync.Cond // body data, window changes, the end of the stream
	cancel context.CancelFunc

	// Receive side.
	remoteDone  bool  // END_STREAM received
	inflow      int64 // stream receive window left
	unsent      int64 // consumed bytes not yet returned to the client
	declared    int64 // content-length, or -1
	received    int64
	buf         []byte // body bytes received, from off
	off         int
	lastRead    uint64      // the connection's readClock when the body was last read, or when bytes came to an empty buffer
	dropped     bool        // the unread body was dropped for BufferLimit
	bodyErr     error       // set when the body ends: io.EOF or why it failed
	bodyClosed  bool        // the handler closed the body
	trailer     http.Header // the request's Trailer: written only by the body's reader, at io.EOF
	gotTrailer  http.Header // trailers received, not yet handed to the reader
	continueDue bool        // 100-continue still to be sent

	// Send side.
	sendWin    int64
	sendPeak   int64 // the largest the stream send window has been
	waitingWin bool
	localDone  bool  // END_STREAM or RST_STREAM sent
	err        error // the stream is dead (reset, connection gone)

	// The handler's request body and response writer live in the
	// stream: one allocation per stream instead of three. Nothing is
	// pooled, so a handler that keeps them past its return holds this
	// stream's memory, never another stream's.
	body    body
	w       responseWriter
	handler http.Handler
	frame   *Stream // set for a request served at frame level (Config.Streams)
}

// abortLocked ends the stream for both sides with err and wakes whoever
// waits on it.
func (s *stream) abortLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	if s.bodyErr == nil {
		s.bodyErr = err
	}
	s.localDone = true
	s.cond.Broadcast()
	s.cancel()
}

// endRemoteLocked handles the client's END_STREAM.
func (s *stream) endRemoteLocked() error {
	s.remoteDone = true
	if s.declared >= 0 && s.received != s.declared {
		s.c.count("content_length_mismatch")
		return http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol}
	}
	if s.bodyErr == nil {
		s.bodyErr = io.EOF
	}
	s.cond.Broadcast()
	if s.localDone {
		s.c.removeLocked(s)
	}
	return nil
}

// endLocalLocked records our END_STREAM; a stream closed both ways is
// forgotten at once, before the flush that releases mu, so that a frame
// the client sends after seeing the end finds it closed.
func (s *stream) endLocalLocked() {
	s.localDone = true
	if s.remoteDone {
		s.c.removeLocked(s)
	}
}

// returnLocked gives n consumed bytes back to the stream window while
// the client may still send, once half the window is owed.
func (s *stream) returnLocked(n int64) {
	if s.remoteDone {
		return
	}
	s.unsent += n
	if s.unsent >= int64(s.c.cfg.StreamWindow)/2 {
		mark := len(s.c.out)
		_ = s.c.wf.WriteWindowUpdate(s.id, uint32(s.unsent))
		s.c.controlDone(mark)
		s.inflow += s.unsent
		s.unsent = 0
	}
}

// processHeaders opens a stream or takes a stream's trailers.
func (c *conn) processHeaders(f *h2hdr.Block) error {
	id := f.StreamID
	if id%2 != 1 {
		c.count("headers_even")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if s := c.streams[id]; s != nil {
		if s.remoteDone {
			c.count("headers_half_closed")
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		}
		return c.processTrailers(s, f)
	}
	if id <= c.maxID {
		if c.evictedLocked(id) {
			// Trailers the client sent before it saw the reset of a
			// body dropped for BufferLimit: ignored (RFC 9113 section
			// 5.1; the block was decoded, so HPACK state is intact).
			return nil
		}
		c.count("stream_went_down")
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.maxID = id
	c.openedLocked(id)
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.count("priority_self")
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if uint32(len(c.streams)) >= c.cfg.MaxConcurrentStreams || c.running >= 2*int(c.cfg.MaxConcurrentStreams) {
		c.count("over_max_streams")
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	head, err := c.checkRequest(f)
	if err != nil {
		return err
	}
	var s *stream
	if sh := c.cfg.Streams; sh != nil && !f.Truncated && sh.Accept(f.Fields) {
		s = c.newFrameStream(f, &head) // streamapi.go
	} else {
		var req *http.Request
		req, s = c.newRequest(f, &head)
		handler := c.handler
		if f.Truncated {
			c.count("header_list_too_long")
			handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "request header fields too large", http.StatusRequestHeaderFieldsTooLarge)
			})
		}
		s.w = responseWriter{s: s, c: c, req: req, header: make(http.Header), clen: -1}
		s.handler = handler
	}
	c.streams[id] = s
	c.running++
	c.handlers.Add(1)
	c.deferHandlerLocked(s)
	return nil
}

func (c *conn) processTrailers(s *stream, f *h2hdr.Block) error {
	if !f.StreamEnded() {
		c.count("trailers_not_ended")
		return http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol}
	}
	if len(f.PseudoFields()) > 0 {
		c.count("trailers_pseudo")
		return http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol}
	}
	for _, hf := range f.RegularFields() {
		key := c.canonical(hf.Name)
		if !httpguts.ValidTrailerHeader(key) {
			c.count("trailers_bogus")
			return http2.StreamError{StreamID: s.id, Code: http2.ErrCodeProtocol}
		}
		if s.frame != nil {
			// The block is the Reader's until its next frame: the
			// stream keeps a copy.
			s.frame.trailers = append(s.frame.trailers, hf)
			continue
		}
		if _, declared := s.trailer[key]; declared {
			if s.gotTrailer == nil {
				s.gotTrailer = make(http.Header, len(s.trailer))
			}
			s.gotTrailer[key] = append(s.gotTrailer[key], hf.Value)
		}
	}
	return s.endRemoteLocked()
}

// reqHead is what the read loop checked of a request's HEADERS block:
// its pseudo-header fields (the authority folded from Host when it came
// there), its declared length, and whether the client must be told to
// continue.
type reqHead struct {
	method, scheme, authority, path string
	declared                        int64 // content-length, or -1
}

// checkRequest checks a request's HEADERS block as RFC 9113 section 8
// and the server's limits require, for both kinds of handler: it returns
// the request's head, or the stream error that makes it malformed (or
// errAbuse for a connection-specific field, which ends the connection).
func (c *conn) checkRequest(f *h2hdr.Block) (reqHead, error) {
	id := f.StreamID
	bad := func(class string) (reqHead, error) {
		c.count(class)
		return reqHead{}, http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	h := reqHead{method: f.PseudoValue("method"), scheme: f.PseudoValue("scheme"),
		authority: f.PseudoValue("authority"), path: f.PseudoValue("path"), declared: -1}
	if f.PseudoValue("protocol") != "" {
		return bad("bad_connect") // extended CONNECT is not offered
	}
	if h.method == "CONNECT" {
		if h.path != "" || h.scheme != "" || h.authority == "" {
			return bad("bad_connect")
		}
	} else if h.method == "" || h.path == "" || (h.scheme != "http" && h.scheme != "https") {
		return bad("bad_path_method")
	}
	// One pass over the fields; the checks then run in a fixed order.
	var connSpecific, teBad, clDiffer bool
	tes, hosts, host, cl := 0, 0, "", ""
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
			connSpecific = true
		case "te":
			tes++
			teBad = teBad || hf.Value != "trailers"
		case "host":
			if hosts == 0 {
				host = hf.Value
			}
			hosts++
		case "content-length":
			if cl == "" {
				cl = hf.Value
			} else if hf.Value != cl {
				clDiffer = true
			}
		}
	}
	// A connection-specific field is no mistake a real client makes: it
	// ends the connection (a stream reset costs the sender nothing).
	if connSpecific {
		c.count("connection_header")
		c.abuseLocked("http2-connection-header", http2.ErrCodeProtocol)
		return reqHead{}, errAbuse
	}
	if tes > 1 || teBad {
		c.count("te_header")
		c.abuseLocked("http2-connection-header", http2.ErrCodeProtocol)
		return reqHead{}, errAbuse
	}
	if hosts == 1 {
		if h.authority == "" {
			h.authority = host
		} else if host != h.authority {
			return bad("authority_host_mismatch")
		}
	} else if hosts > 1 {
		return bad("multiple_host_headers")
	}
	if strings.IndexByte(h.authority, '@') >= 0 || h.authority != "" && !httpguts.ValidHostHeader(h.authority) {
		return bad("invalid_authority")
	}
	if h.method != "CONNECT" {
		if h.path[0] != '/' && (h.path != "*" || h.method != "OPTIONS") {
			return bad("bad_path")
		}
		if !validRequestPath(h.path) {
			return bad("bad_path")
		}
	}
	if clDiffer {
		return bad("content_length")
	}
	if cl != "" {
		n, err := strconv.ParseUint(cl, 10, 63)
		if err != nil {
			return bad("content_length")
		}
		h.declared = int64(n)
	}
	if f.StreamEnded() && h.declared > 0 {
		return bad("content_length_mismatch")
	}
	return h, nil
}

// validRequestPath reports whether url.ParseRequestURI accepts path
// (which starts with "/", or is "*"): no control bytes, and valid
// percent-escapes before the query (path_test.go holds the two to the
// same answers).
func validRequestPath(path string) bool {
	q := len(path)
	for i := 0; i < len(path); i++ {
		b := path[i]
		if b < ' ' || b == 0x7f {
			return false
		}
		if b == '?' && q == len(path) {
			q = i
		}
	}
	for i := 0; i < q; i++ {
		if path[i] != '%' {
			continue
		}
		if i+2 >= q || !isHex(path[i+1]) || !isHex(path[i+2]) {
			return false
		}
		i += 2
	}
	return true
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// newStream makes the stream of a checked request.
func (c *conn) newStream(id uint32, h *reqHead) (*stream, context.Context) {
	ctx, cancel := context.WithCancel(c.baseCtx)
	s := &stream{
		c:        c,
		id:       id,
		cancel:   cancel,
		inflow:   int64(c.cfg.StreamWindow),
		declared: h.declared,
		sendWin:  c.initialWin,
		sendPeak: c.initialWin,
	}
	s.body.s = s
	s.cond.L = &c.mu
	return s, ctx
}

// newRequest builds a handler's request from a checked HEADERS block.
func (c *conn) newRequest(f *h2hdr.Block, h *reqHead) (*http.Request, *stream) {
	fields := f.RegularFields()
	header := make(http.Header, len(fields))
	// The values of all keys share one backing array; a repeated key's
	// append copies its values out of it (each key's slice is capped).
	strs := make([]string, len(fields))
	for i, hf := range fields {
		k := c.canonical(hf.Name)
		if vv, ok := header[k]; ok {
			header[k] = append(vv, hf.Value)
			continue
		}
		strs[i] = hf.Value
		header[k] = strs[i : i+1 : i+1]
	}
	delete(header, "Host")
	if cookies := header["Cookie"]; len(cookies) > 1 {
		header["Cookie"] = []string{strings.Join(cookies, "; ")}
	}
	var u *url.URL
	requestURI := h.path
	if h.method == "CONNECT" {
		u, requestURI = &url.URL{Host: h.authority}, h.authority
	} else {
		// checkRequest accepted the path: ParseRequestURI does too.
		u, _ = url.ParseRequestURI(h.path)
	}
	s, ctx := c.newStream(f.StreamID, h)
	var trailer http.Header
	for _, v := range header["Trailer"] {
		for _, key := range strings.Split(v, ",") {
			key = textproto.CanonicalMIMEHeaderKey(textproto.TrimString(key))
			switch key {
			case "", "Transfer-Encoding", "Trailer", "Content-Length":
			default:
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[key] = nil
			}
		}
	}
	delete(header, "Trailer")
	s.trailer = trailer
	if httpguts.HeaderValuesContainsToken(header["Expect"], "100-continue") {
		delete(header, "Expect")
		s.continueDue = !f.StreamEnded()
	}
	req := &http.Request{
		Method:     h.method,
		URL:        u,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     header,
		Host:       h.authority,
		RemoteAddr: c.remote,
		RequestURI: requestURI,
		Trailer:    trailer,
	}
	if h.scheme == "https" {
		req.TLS = c.tls
	}
	if f.StreamEnded() {
		s.remoteDone = true
		s.bodyErr = io.EOF
		req.Body = http.NoBody
	} else {
		req.ContentLength = h.declared
		req.Body = &s.body
	}
	return req.WithContext(ctx), s
}

// canonical returns the canonical form of a lower-case header name.
func (c *conn) canonical(name string) string {
	return cachedName(c.canon, name, http.CanonicalHeaderKey)
}

// cachedName returns f(name), remembered per connection in m for the
// first maxCanonCache names (a client cannot grow it further).
func cachedName(m map[string]string, name string, f func(string) string) string {
	if v, ok := m[name]; ok {
		return v
	}
	v := f(name)
	if len(m) < maxCanonCache {
		m[name] = v
	}
	return v
}

// runHandler runs one stream's handler and finishes its response.
func (c *conn) runHandler(s *stream) {
	w, req, h := &s.w, s.w.req, s.handler
	defer c.handlers.Done()
	ok := false
	defer func() {
		if !ok {
			e := recover()
			if e != http.ErrAbortHandler {
				c.cfg.Logger.Error("HTTP/2 handler panicked", "client", c.remote, "panic", fmt.Sprint(e))
			}
			c.mu.Lock()
			if !s.localDone {
				c.resetLocked(s.id, http2.ErrCodeInternal)
				_ = c.flushLocked()
			}
			c.handlerEndLocked(s)
			c.mu.Unlock()
		}
	}()
	if s.frame != nil {
		c.cfg.Streams.Serve(s.frame)
	} else {
		h.ServeHTTP(w, req)
	}
	ok = true
	c.mu.Lock()
	if s.frame != nil {
		s.frame.finishLocked()
	} else {
		w.finishLocked()
	}
	c.handlerEndLocked(s)
	c.mu.Unlock()
}

// handlerEndLocked accounts for a handler that returned: a client still
// sending its body is told to stop (RST_STREAM NO_ERROR, after the
// complete response), the stream is forgotten once closed both ways.
func (c *conn) handlerEndLocked(s *stream) {
	c.running--
	s.cancel()
	if c.streams[s.id] == s {
		if !s.remoteDone && s.err == nil {
			mark := len(c.out)
			_ = c.wf.WriteRSTStream(s.id, http2.ErrCodeNo)
			c.controlDone(mark)
			c.countResetLocked(s.id)
			_ = c.flushLocked()
			s.abortLocked(errStreamClosed)
		}
		if s.localDone {
			c.removeLocked(s)
		}
	}
	if c.streams[s.id] != s {
		s.dropBufLocked()
	}
	c.maybeCloseLocked()
}

// body is a request body: what the client sent, in order, bounded by the
// stream's receive window.
type body struct {
	s *stream
}

// Read reads body bytes; with the last of them it returns io.EOF when
// the client's END_STREAM has arrived.
func (b *body) Read(p []byte) (int, error) {
	s := b.s
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.bodyClosed {
		return 0, errBodyClosed
	}
	if s.continueDue && len(s.buf) == s.off && s.bodyErr == nil {
		s.continueDue = false
		c.writeHeadersLocked(s, 100, nil, false)
		_ = c.flushLocked()
	}
	for len(s.buf) == s.off && s.bodyErr == nil {
		s.cond.Wait()
	}
	s.continueDue = false
	n := copy(p, s.buf[s.off:])
	s.off += n
	if s.off == len(s.buf) {
		s.buf, s.off = s.buf[:0], 0
	}
	if n > 0 {
		c.buffered -= int64(n)
		c.readClock++
		s.lastRead = c.readClock
		before := len(c.out)
		s.returnLocked(int64(n))
		if len(c.out) > before {
			_ = c.flushLocked() // a window update: the client may be waiting
		}
	}
	if s.off == len(s.buf) && s.bodyErr != nil {
		if errors.Is(s.bodyErr, io.EOF) {
			// The request's Trailer map is filled here, on the reader's
			// goroutine, as net/http promises it: after the body's EOF.
			// The read loop never touches a map the handler holds.
			for k, vs := range s.gotTrailer {
				s.trailer[k] = vs
			}
			s.gotTrailer = nil
			return n, io.EOF
		}
		return n, s.bodyErr
	}
	return n, nil
}

// ReadReady reports whether Read would return without blocking.
func (b *body) ReadReady() bool {
	c := b.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(b.s.buf) > b.s.off || b.s.bodyErr != nil || b.s.bodyClosed
}

// Close drops the rest of the body; the client is told to stop sending
// when the handler returns.
func (b *body) Close() error {
	s := b.s
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !s.bodyClosed {
		s.bodyClosed = true
		s.dropBufLocked()
		s.cond.Broadcast()
	}
	return nil
}

// appendLocked buffers received body bytes, within twice the stream
// window (bodybuf.Append).
func (s *stream) appendLocked(data []byte) {
	s.buf, s.off = bodybuf.Append(s.buf, s.off, data, int(s.c.cfg.StreamWindow))
}

// dropBufLocked forgets the stream's unread body bytes.
func (s *stream) dropBufLocked() {
	s.c.buffered -= int64(len(s.buf) - s.off)
	s.buf, s.off = nil, 0
}
