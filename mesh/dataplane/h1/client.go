package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client sends HTTP/1.1 requests over kept-alive connections, one pool
// per address. It is the proxy's lean alternative to http.Transport for
// the hop to an HTTP/1 upstream: the request is written and the response
// read on the caller's goroutine (a request body of unknown or large size
// is written by a second one), with no per-connection reader and writer
// goroutines. Responses are parsed as strictly as requests (bare LF,
// obs-fold, control characters, Content-Length with Transfer-Encoding
// are refused), except that header names may contain "_".
type Client struct {
	// Dial opens a connection to addr.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// MaxIdlePerAddr bounds kept-alive connections per address (default
	// 64).
	MaxIdlePerAddr int
	// IdleTimeout closes connections idle for longer (default 90s).
	IdleTimeout time.Duration
	// Limits bound response heads (MaxHeaderBytes, MaxHeaders).
	Limits Limits

	mu     sync.Mutex
	idle   map[string][]*clientConn
	closed bool
}

type clientConn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	addr  string
	since time.Time
}

// ErrClientClosed is returned once the client was closed.
var ErrClientClosed = errors.New("h1: client closed")

func (cl *Client) maxIdle() int {
	if cl.MaxIdlePerAddr > 0 {
		return cl.MaxIdlePerAddr
	}
	return 64
}

func (cl *Client) idleTimeout() time.Duration {
	if cl.IdleTimeout > 0 {
		return cl.IdleTimeout
	}
	return 90 * time.Second
}

// get returns an idle connection to addr, or nil.
func (cl *Client) get(addr string) *clientConn {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	list := cl.idle[addr]
	for len(list) > 0 {
		cc := list[len(list)-1]
		list = list[:len(list)-1]
		if time.Since(cc.since) < cl.idleTimeout() {
			cl.idle[addr] = list
			return cc
		}
		cc.c.Close()
	}
	delete(cl.idle, addr)
	return nil
}

func (cl *Client) put(cc *clientConn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.closed || len(cl.idle[cc.addr]) >= cl.maxIdle() {
		cc.c.Close()
		return
	}
	if cl.idle == nil {
		cl.idle = map[string][]*clientConn{}
	}
	cc.since = time.Now()
	cl.idle[cc.addr] = append(cl.idle[cc.addr], cc)
}

// CloseIdle closes every idle connection; close also refuses new
// requests.
func (cl *Client) CloseIdle(close bool) {
	cl.mu.Lock()
	idle := cl.idle
	cl.idle = nil
	cl.closed = cl.closed || close
	cl.mu.Unlock()
	for _, list := range idle {
		for _, cc := range list {
			cc.c.Close()
		}
	}
}

// Sweep closes connections idle past the idle timeout.
func (cl *Client) Sweep() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for addr, list := range cl.idle {
		keep := list[:0]
		for _, cc := range list {
			if time.Since(cc.since) < cl.idleTimeout() {
				keep = append(keep, cc)
			} else {
				cc.c.Close()
			}
		}
		if len(keep) == 0 {
			delete(cl.idle, addr)
		} else {
			cl.idle[addr] = keep
		}
	}
}

// DialError marks a failure to connect: the request was not sent.
type DialError struct{ Err error }

// Error returns the dial error's text.
func (e *DialError) Error() string { return e.Err.Error() }

// Unwrap returns the dial error.
func (e *DialError) Unwrap() error { return e.Err }

// RequestBodyError is returned by RoundTrip when reading the request body
// failed: the side that sends the body went away or sent a malformed one
// (for a body read by a Server, StatusOf gives the status to answer, 0
// when the client went away). The exchange ends at once: the upstream
// connection is closed, never reused, and whatever the upstream answered
// is discarded.
type RequestBodyError struct{ Err error }

// Error describes the failed read.
func (e *RequestBodyError) Error() string { return "h1: reading the request body: " + e.Err.Error() }

// Unwrap returns the read error.
func (e *RequestBodyError) Unwrap() error { return e.Err }

// syncBodyLimit is the largest body of known length written on the
// caller's goroutine before the response is read.
const syncBodyLimit = 64 << 10

// RoundTrip sends req to addr and returns the response, whose Body must
// be read to the end or closed. req.URL.RequestURI() is the request
// target and req.Host the Host field; the header is sent as is except for
// hop-by-hop fields, which the client sets itself. Informational
// responses are handed to the request's httptrace Got1xxResponse.
func (cl *Client) RoundTrip(req *http.Request, addr string) (*http.Response, error) {
	ctx := req.Context()
	noBody := req.Body == nil || req.Body == http.NoBody
	for attempt := 0; ; attempt++ {
		cc := cl.get(addr)
		reused := cc != nil
		if cc == nil {
			cl.mu.Lock()
			closed := cl.closed
			cl.mu.Unlock()
			if closed {
				return nil, ErrClientClosed
			}
			c, err := cl.Dial(ctx, addr)
			if err != nil {
				return nil, &DialError{err}
			}
			cc = &clientConn{c: c, br: bufio.NewReaderSize(c, 4096), bw: bufio.NewWriterSize(c, 4096), addr: addr}
		}
		resp, err := cl.exchange(cc, req, noBody)
		if err != nil && reused && attempt == 0 && errors.Is(err, errStale) && noBody && replayable(req) {
			continue // the server closed the idle connection first
		}
		return resp, err
	}
}

// errStale marks a failure before any byte of the response arrived on a
// kept-alive connection.
var errStale = errors.New("h1: connection closed before the response")

func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return req.Header.Get("Idempotency-Key") != "" || req.Header.Get("X-Idempotency-Key") != ""
}

func (cl *Client) exchange(cc *clientConn, req *http.Request, noBody bool) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { cc.c.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		cc.c.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	chunked := !noBody && req.ContentLength < 0
	if err := writeHead(cc.bw, req, noBody, chunked); err != nil {
		return fail(err)
	}
	// The body: small known lengths inline, the rest concurrently so that
	// an early answer (413, a streaming response) can be read.
	var async *bodyWriter
	switch {
	case noBody:
		if err := cc.bw.Flush(); err != nil {
			return fail(fmt.Errorf("%w: %w", errStale, err))
		}
	case !chunked && req.ContentLength <= syncBodyLimit:
		if err := writeBody(cc.bw, req, false, nil); err != nil {
			return fail(err)
		}
	default:
		// A body that fails to arrive (the client went away, or sent a
		// malformed chunk) ends the exchange at once: the upstream would
		// otherwise wait for the rest of it, and this side for its answer.
		async = &bodyWriter{cl: cl, cc: cc, finished: make(chan struct{})}
		go func() {
			err := writeBody(cc.bw, req, chunked, func() { async.eof.Store(true) })
			var be *RequestBodyError
			if errors.As(err, &be) {
				async.failed.Store(be)
				cc.c.Close()
			}
			async.written(err)
		}()
	}

	trace := httptrace.ContextClientTrace(ctx)
	var resp *http.Response
	for informational := 0; ; informational++ {
		r, err := readResponse(cc.br, req, cl.Limits)
		if err != nil {
			if be := async.failure(); be != nil {
				return fail(be)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("%w: %w", errStale, err)
			}
			return fail(err)
		}
		if r.StatusCode >= 200 || r.StatusCode == http.StatusSwitchingProtocols {
			resp = r
			break
		}
		if informational >= 5 {
			return fail(errors.New("h1: too many informational responses"))
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(r.StatusCode, textproto.MIMEHeader(r.Header)); err != nil {
				return fail(err)
			}
		}
	}
	body, err := newClientBody(cl, cc, req, resp, stop, async)
	if err != nil {
		return fail(err)
	}
	resp.Body = body
	return resp, nil
}

// writeHead writes the request line and header fields.
func writeHead(bw *bufio.Writer, req *http.Request, noBody, chunked bool) error {
	target := req.URL.RequestURI()
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !validMethod(req.Method) || checkTarget(req.Method, target) != nil || !validHost(host) {
		return fmt.Errorf("h1: refusing to send an invalid request line or host %q", host)
	}
	bw.WriteString(req.Method)
	bw.WriteByte(' ')
	bw.WriteString(target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	for k, vs := range req.Header {
		if skipOnWrite(k) || k == "Host" || k == "Content-Length" {
			continue
		}
		for _, v := range vs {
			if v == "" && k == "User-Agent" {
				continue
			}
			if !ValidHeader(k, v) {
				return fmt.Errorf("h1: refusing to send header %q", k)
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	switch {
	case chunked:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
		if len(req.Trailer) > 0 {
			names := make([]string, 0, len(req.Trailer))
			for k := range req.Trailer {
				if !IsMeshHeader(k) && ValidName(k) && !forbiddenTrailer(k) {
					names = append(names, k)
				}
			}
			if len(names) > 0 {
				bw.WriteString("Trailer: " + strings.Join(names, ", ") + "\r\n")
			}
		}
	case !noBody:
		bw.WriteString("Content-Length: " + strconv.FormatInt(req.ContentLength, 10) + "\r\n")
	case req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch:
		bw.WriteString("Content-Length: 0\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

var bodyBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// writeBody copies the request body, chunked when asked, and flushes.
// eof, when set, is called once the whole body was read.
func writeBody(bw *bufio.Writer, req *http.Request, chunked bool, eof func()) error {
	bp := bodyBufs.Get().(*[]byte)
	defer bodyBufs.Put(bp)
	buf := *bp
	var written int64
	for {
		n, rerr := req.Body.Read(buf)
		if n > 0 {
			if !chunked && written+int64(n) > req.ContentLength {
				return &RequestBodyError{errors.New("h1: request body longer than its Content-Length")}
			}
			if chunked {
				bw.WriteString(strconv.FormatInt(int64(n), 16))
				bw.WriteString("\r\n")
				bw.Write(buf[:n])
				bw.WriteString("\r\n")
			} else if _, err := bw.Write(buf[:n]); err != nil {
				return err
			}
			written += int64(n)
			if chunked {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &RequestBodyError{rerr}
		}
	}
	if eof != nil {
		eof()
	}
	if chunked {
		bw.WriteString("0\r\n")
		for k, vs := range req.Trailer {
			for _, v := range vs {
				if ValidHeader(k, v) && !forbiddenTrailer(k) && !IsMeshHeader(k) {
					bw.WriteString(k + ": " + v + "\r\n")
				}
			}
		}
		bw.WriteString("\r\n")
	} else if written != req.ContentLength {
		return &RequestBodyError{io.ErrUnexpectedEOF}
	}
	return bw.Flush()
}

// readResponse reads a response head and decides its framing (the body
// is set by newClientBody).
func readResponse(br *bufio.Reader, req *http.Request, lim Limits) (*http.Response, error) {
	lim = lim.withDefaults()
	lr := &lineReader{br: br, budget: lim.MaxHeaderBytes}
	line, err := lr.line(lim.MaxRequestLine, http.StatusBadGateway)
	if err != nil {
		return nil, err
	}
	s := string(line)
	if len(s) < 12 || !strings.HasPrefix(s, "HTTP/1.") || (s[7] != '0' && s[7] != '1') || s[8] != ' ' {
		return nil, fmt.Errorf("h1: malformed status line %q", abbreviate(s))
	}
	code, err := strconv.Atoi(s[9:12])
	if err != nil || code < 100 || code > 999 || (len(s) > 12 && s[12] != ' ') {
		return nil, fmt.Errorf("h1: malformed status line %q", abbreviate(s))
	}
	h, err := readResponseFields(lr, lim)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{
		Status:     s[9:],
		StatusCode: code,
		Proto:      s[:8],
		ProtoMajor: 1,
		ProtoMinor: int(s[7] - '0'),
		Header:     h,
		Request:    req,
	}
	return resp, nil
}

// readResponseFields is readFields allowing "_" in names (responses
// only).
func readResponseFields(lr *lineReader, lim Limits) (http.Header, error) {
	h := make(http.Header, 8)
	n := 0
	for {
		line, err := lr.line(lim.MaxHeaderBytes, http.StatusBadGateway)
		if err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if n++; n > lim.MaxHeaders {
			return nil, errors.New("h1: too many response header fields")
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, errors.New("h1: obsolete line folding in a response")
		}
		colon := strings.IndexByte(string(line), ':')
		if colon <= 0 {
			return nil, errors.New("h1: malformed response header line")
		}
		for _, c := range line[:colon] {
			if !isTokenChar(c) {
				return nil, fmt.Errorf("h1: invalid response header name %q", abbreviate(string(line[:colon])))
			}
		}
		value := trimOWS(line[colon+1:])
		for _, c := range value {
			if !validValueByte(c) {
				return nil, fmt.Errorf("h1: invalid character in response header %q", abbreviate(string(line[:colon])))
			}
		}
		key := textproto.CanonicalMIMEHeaderKey(string(line[:colon]))
		h[key] = append(h[key], string(value))
	}
}

// clientBody reads a response body and gives the connection back to the
// pool at its end when it can carry another exchange.
type clientBody struct {
	cl       *Client
	cc       *clientConn
	r        io.Reader
	resp     *http.Response
	reusable bool
	stop     func() bool
	async    *bodyWriter // the request body's writer, when it runs on its own
	mu       sync.Mutex
	done     bool
}

func newClientBody(cl *Client, cc *clientConn, req *http.Request, resp *http.Response, stop func() bool, async *bodyWriter) (io.ReadCloser, error) {
	b := &clientBody{cl: cl, cc: cc, resp: resp, stop: stop, async: async}
	h := resp.Header
	te, cls := h["Transfer-Encoding"], h["Content-Length"]
	closeAsked := req.Close || resp.ProtoMinor == 0
	for _, t := range ConnectionTokens(h) {
		switch t {
		case "close":
			closeAsked = true
		case "keep-alive":
			if resp.ProtoMinor == 0 {
				closeAsked = false
			}
		}
	}
	resp.ContentLength = -1
	noBody := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.StatusCode == http.StatusSwitchingProtocols
	switch {
	case len(te) > 0 && len(cls) > 0:
		return nil, errors.New("h1: response with both Content-Length and Transfer-Encoding")
	case noBody:
		b.r = eofReader{}
		if n, ok := singleLength(cls); ok {
			resp.ContentLength = n
		}
		if req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
	case len(te) > 0:
		if len(te) != 1 || !strings.EqualFold(strings.TrimSpace(te[len(te)-1]), "chunked") {
			// Another coding: the body runs to the end of the connection.
			b.r = cc.br
			closeAsked = true
			break
		}
		cr := NewChunkedReader(cc.br, 0)
		b.r = &trailerReader{cr: cr, resp: resp}
		if tr := h["Trailer"]; len(tr) > 0 {
			resp.Trailer = http.Header{}
			for _, v := range tr {
				for _, k := range strings.Split(v, ",") {
					if k = strings.TrimSpace(k); k != "" {
						resp.Trailer[http.CanonicalHeaderKey(k)] = nil
					}
				}
			}
		}
	case len(cls) > 0:
		n, ok := singleLength(cls)
		if !ok {
			return nil, errors.New("h1: response with an invalid Content-Length")
		}
		resp.ContentLength = n
		b.r = io.LimitReader(cc.br, n)
	default:
		b.r = cc.br
		closeAsked = true
	}
	delete(h, "Transfer-Encoding")
	if len(te) > 0 {
		resp.TransferEncoding = []string{"chunked"}
	}
	resp.Close = closeAsked
	b.reusable = !closeAsked
	if noBody || resp.ContentLength == 0 {
		b.finish(true)
	}
	return b, nil
}

// singleLength reads Content-Length values that all agree.
func singleLength(vs []string) (int64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	var n int64 = -1
	for _, v := range vs {
		for _, part := range strings.Split(v, ",") {
			m, ok := parseContentLength(strings.TrimSpace(part))
			if !ok || (n >= 0 && m != n) {
				return 0, false
			}
			n = m
		}
	}
	return n, true
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// trailerReader copies the chunked body's trailers into the response at
// its end.
type trailerReader struct {
	cr   *ChunkedReader
	resp *http.Response
}

func (t *trailerReader) Read(p []byte) (int, error) {
	n, err := t.cr.Read(p)
	if err == io.EOF {
		for k, v := range t.cr.Trailer() {
			if t.resp.Trailer == nil {
				t.resp.Trailer = http.Header{}
			}
			t.resp.Trailer[k] = v
		}
	}
	return n, err
}

func (b *clientBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return 0, io.EOF
	}
	b.mu.Unlock()
	n, err := b.r.Read(p)
	if err == io.EOF {
		if lr, ok := b.r.(*io.LimitedReader); ok && lr.N > 0 {
			err = io.ErrUnexpectedEOF
		} else if b.r == io.Reader(b.cc.br) {
			b.finish(false) // read to the end of the connection
			return n, io.EOF
		} else {
			b.finish(true)
			return n, io.EOF
		}
	}
	if lr, ok := b.r.(*io.LimitedReader); ok && lr.N == 0 && err == nil {
		b.finish(true)
		return n, io.EOF
	}
	if err != nil {
		b.finish(false)
	}
	return n, err
}

// finish ends the exchange: the connection goes back to the pool when the
// response was read whole, the request body written whole and nothing
// asked to close it.
func (b *clientBody) finish(complete bool) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	b.mu.Unlock()
	stopped := b.stop()
	reuse := complete && b.reusable && stopped
	if b.async != nil {
		b.async.responded(reuse)
		return
	}
	if reuse {
		b.cl.put(b.cc)
		return
	}
	b.cc.c.Close()
}

// bodyWriter is a request body written on a goroutine of its own while
// the response is read. The connection goes back to the pool only when
// both ended cleanly, whichever ends last deciding.
type bodyWriter struct {
	cl       *Client
	cc       *clientConn
	failed   atomic.Pointer[RequestBodyError]
	eof      atomic.Bool   // the whole body was read from its source
	finished chan struct{} // closed when writing ended

	mu        sync.Mutex
	writeDone bool
	writeErr  error
	respDone  bool
	respReuse bool
	settled   bool
}

// lastChunkWait bounds how long a response that ended cleanly waits for
// the end of a body already read whole to be written (a few bytes the
// upstream, which has answered, reads at once); past it the connection is
// closed instead of reused.
const lastChunkWait = time.Second

// failure returns the request body's read error, if reading it failed.
func (w *bodyWriter) failure() *RequestBodyError {
	if w == nil {
		return nil
	}
	return w.failed.Load()
}

// written records the end of the body.
func (w *bodyWriter) written(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeDone, w.writeErr = true, err
	close(w.finished)
	if w.respDone {
		w.settle(w.respReuse && err == nil)
	}
}

// responded records the end of the response and whether it leaves the
// connection reusable. When only the end of the body remains to be
// written, it waits for it, so that the next request finds the connection
// in the pool.
func (w *bodyWriter) responded(reuse bool) {
	if reuse && w.eof.Load() {
		select {
		case <-w.finished:
		default:
			_ = w.cc.c.SetWriteDeadline(time.Now().Add(lastChunkWait))
			<-w.finished
			_ = w.cc.c.SetWriteDeadline(time.Time{})
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.respDone, w.respReuse = true, reuse
	switch {
	case w.writeDone:
		w.settle(reuse && w.writeErr == nil)
	case !reuse:
		// The writer, still running, fails on the closed connection.
		w.settle(false)
	}
	// Otherwise the writer, still reading the body, decides when it ends.
}

func (w *bodyWriter) settle(reuse bool) {
	if w.settled {
		return
	}
	w.settled = true
	if reuse {
		w.cl.put(w.cc)
		return
	}
	w.cc.c.Close()
}

// Close ends the body; unread bytes make the connection unusable.
func (b *clientBody) Close() error {
	b.finish(false)
	return nil
}
