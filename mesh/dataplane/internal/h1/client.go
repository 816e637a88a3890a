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
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Client sends HTTP/1.1 requests over kept-alive connections, one pool
// per address. It is the proxy's lean alternative to http.Transport for
// the hop to an HTTP/1 upstream: the request is written and the response
// read on the caller's goroutine (a request body of unknown or large size
// is written by a second one), with no per-connection reader and writer
// goroutines. Responses are parsed as strictly as requests (bare LF,
// obs-fold, control characters, Content-Length with Transfer-Encoding,
// Transfer-Encoding on HTTP/1.0 or other than chunked are refused),
// except that header names may contain "_".
type Client struct {
	// Dial opens a connection to addr.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// MaxIdlePerAddr bounds kept-alive connections per address (default
	// 64).
	MaxIdlePerAddr int
	// MaxConnsPerAddr, when positive, bounds the connections open to one
	// address, idle and busy together: a request that finds none idle and
	// the bound reached waits, within its context, for one to come back
	// or to close. Zero means no bound.
	MaxConnsPerAddr int
	// IdleTimeout closes connections idle for longer (default 90s).
	IdleTimeout time.Duration
	// Reusable, if set, is asked before an idle connection is reused,
	// with the connection Dial returned and how long it has been idle;
	// false closes it (the server closed it meanwhile, or sent bytes
	// nobody asked for) and the request takes another one.
	Reusable func(c net.Conn, idle time.Duration) bool
	// Limits bound response heads (MaxHeaderBytes, MaxHeaders).
	Limits Limits
	// OmitTrailer, if set, names request trailer fields that are neither
	// announced nor sent (besides those never allowed in a trailer). The
	// caller's own fields, such as a mesh's, are its rule, not the
	// codec's.
	OmitTrailer func(name string) bool

	// MaxConnsPerClient, when positive (with MaxConnsPerAddr), bounds the
	// connections to one address that the requests of one client (the
	// client argument of RoundTripFrom) hold at once, idle connections
	// taken included: past it, that client's requests wait for one of
	// its own to come back rather than take the rest of the pool.
	MaxConnsPerClient int
	// WaitTimeout, when positive, bounds how long a request waits for a
	// connection (MaxConnsPerAddr or MaxConnsPerClient reached): past it
	// RoundTrip returns a *PoolTimeoutError. The request's context bounds
	// the wait too.
	WaitTimeout time.Duration

	mu      sync.Mutex
	idle    map[string][]*clientConn
	open    map[string]int           // connections open per address (MaxConnsPerAddr)
	held    map[heldKey]int          // connections held per address and client (MaxConnsPerClient)
	wake    map[string]chan struct{} // closed when a connection to the address comes back or closes
	waiting int                      // requests waiting for a connection
	closed  bool
}

type clientConn struct {
	c     net.Conn // raw, wrapped to release its slot on its first Close
	raw   net.Conn // what Dial returned (for Reusable)
	br    *bufio.Reader
	bw    *bufio.Writer
	addr  string
	since time.Time
	sock  syscall.RawConn // the socket under raw (SocketOf), or nil

	// The client whose request holds the connection, counted in
	// Client.held while holds is set; both under Client.mu.
	client netip.Addr
	holds  bool

	// sendAndAwait's state, used by one exchange at a time.
	awaitFn func(uintptr) bool
	sent    bool
	sendErr error
}

// ErrClientClosed is returned once the client was closed.
var ErrClientClosed = errors.New("h1: client closed")

func (cl *Client) maxIdle() int {
	if cl.MaxIdlePerAddr > 0 {
		return cl.MaxIdlePerAddr
	}
	return 64
}

func (cl *Client) omitTrailer(name string) bool {
	return cl.OmitTrailer != nil && cl.OmitTrailer(name)
}

func (cl *Client) idleTimeout() time.Duration {
	if cl.IdleTimeout > 0 {
		return cl.IdleTimeout
	}
	return 90 * time.Second
}

// takeIdle returns an idle connection to addr, or nil, and the ones it
// found idle past the idle timeout, for the caller to close once it
// unlocked cl.mu (closing one releases its slot). cl.mu is held.
func (cl *Client) takeIdle(addr string) (cc *clientConn, stale []*clientConn) {
	list := cl.idle[addr]
	for len(list) > 0 {
		cc := list[len(list)-1]
		list[len(list)-1] = nil
		list = list[:len(list)-1]
		if time.Since(cc.since) < cl.idleTimeout() {
			cl.idle[addr] = list
			return cc, stale
		}
		stale = append(stale, cc)
	}
	delete(cl.idle, addr)
	return nil, stale
}

func closeAll(list []*clientConn) {
	for _, cc := range list {
		cc.c.Close()
	}
}

func (cl *Client) put(cc *clientConn) {
	cl.mu.Lock()
	cl.drop(cc)
	if cl.closed || len(cl.idle[cc.addr]) >= cl.maxIdle() {
		cl.mu.Unlock()
		cc.c.Close()
		return
	}
	if cl.idle == nil {
		cl.idle = map[string][]*clientConn{}
	}
	cc.since = time.Now()
	cl.idle[cc.addr] = append(cl.idle[cc.addr], cc)
	cl.signal(cc.addr)
	cl.mu.Unlock()
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
	var stale []*clientConn
	cl.mu.Lock()
	for addr, list := range cl.idle {
		keep := list[:0]
		for _, cc := range list {
			if time.Since(cc.since) < cl.idleTimeout() {
				keep = append(keep, cc)
			} else {
				stale = append(stale, cc)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(cl.idle, addr)
		} else {
			cl.idle[addr] = keep
		}
	}
	cl.mu.Unlock()
	closeAll(stale)
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
	return cl.RoundTripFrom(req, addr, netip.Addr{})
}

// RoundTripFrom is RoundTrip for a request of client, the downstream
// party MaxConnsPerClient counts (the zero Addr is one client too).
func (cl *Client) RoundTripFrom(req *http.Request, addr string, client netip.Addr) (*http.Response, error) {
	ctx := req.Context()
	noBody := req.Body == nil || req.Body == http.NoBody
	for attempt := 0; ; attempt++ {
		cc, err := cl.acquire(ctx, addr, client)
		if err != nil {
			return nil, err
		}
		reused := cc != nil
		if cc == nil {
			c, err := cl.Dial(ctx, addr)
			if err != nil {
				cl.unreserve(addr, client)
				return nil, &DialError{err}
			}
			raw := c
			sc := &slotConn{Conn: c}
			cc = &clientConn{c: sc, raw: raw, br: bufio.NewReaderSize(sc, 4096), bw: bufio.NewWriterSize(sc, 4096), addr: addr, sock: SocketOf(raw), client: client, holds: cl.MaxConnsPerClient > 0}
			sc.release = func() { cl.release(cc) }
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
	if err := writeHead(cc.bw, req, noBody, chunked, cl.omitTrailer); err != nil {
		return fail(err)
	}
	// The body: small known lengths inline, the rest concurrently so that
	// an early answer (413, a streaming response) can be read.
	var async *bodyWriter
	switch {
	case noBody:
		if err := cc.sendAndAwait(); err != nil {
			return fail(fmt.Errorf("%w: %w", errStale, err))
		}
	case !chunked && req.ContentLength <= syncBodyLimit:
		if err := writeBody(cc.bw, req, false, nil, nil, cc.sendAndAwait); err != nil {
			return fail(err)
		}
	default:
		// A body that fails to arrive (the client went away, or sent a
		// malformed chunk) ends the exchange at once: the upstream would
		// otherwise wait for the rest of it, and this side for its answer.
		async = &bodyWriter{cl: cl, cc: cc, finished: make(chan struct{})}
		go func() {
			err := writeBody(cc.bw, req, chunked, cl.omitTrailer, func() { async.eof.Store(true) }, cc.bw.Flush)
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
		if be := async.failure(); be != nil {
			// The body failed first, and closing the connection for it
			// may be what the upstream answered (its own "client went
			// away"): the answer is discarded, as documented.
			return fail(be)
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
func writeHead(bw *bufio.Writer, req *http.Request, noBody, chunked bool, omit func(string) bool) error {
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
				if ValidName(k) && !forbiddenTrailer(k) && !omit(k) {
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
// Trailers omit refuses are not written; eof, when set, is called once
// the whole body was read.
func writeBody(bw *bufio.Writer, req *http.Request, chunked bool, omit func(string) bool, eof func(), flush func() error) error {
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
				if ValidHeader(k, v) && !forbiddenTrailer(k) && !omit(k) {
					bw.WriteString(k + ": " + v + "\r\n")
				}
			}
		}
		bw.WriteString("\r\n")
	} else if written != req.ContentLength {
		return &RequestBodyError{io.ErrUnexpectedEOF}
	}
	return flush()
}

// readResponse reads a response head and decides its framing (the body
// is set by newClientBody).
func readResponse(br *bufio.Reader, req *http.Request, lim Limits) (*http.Response, error) {
	lim = lim.withDefaults()
	lr := &lineReader{br: br, budget: lim.MaxHeaderBytes}
	line, err := lr.line(lim.MaxRequestLine, http.StatusBadGateway)
	if err != nil {
		return nil, responseError(err)
	}
	s := string(line)
	if len(s) < 12 || !strings.HasPrefix(s, "HTTP/1.") || (s[7] != '0' && s[7] != '1') || s[8] != ' ' {
		return nil, fmt.Errorf("h1: malformed status line %q", abbreviate(s))
	}
	code, err := strconv.Atoi(s[9:12])
	if err != nil || code < 100 || code > 999 || (len(s) > 12 && s[12] != ' ') {
		return nil, fmt.Errorf("h1: malformed status line %q", abbreviate(s))
	}
	h, err := readFields(lr, fieldRules{maxLine: lim.MaxHeaderBytes, maxFields: lim.MaxHeaders, tooLarge: http.StatusBadGateway, underscore: true})
	if err != nil {
		return nil, responseError(err)
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

// responseError turns a refusal of the response head (an *Error, whose
// status is the answer to a request) into a plain error: the exchange
// failed upstream, and nothing about it is the client's to be told.
func responseError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return fmt.Errorf("h1: invalid response: %s", e.Reason)
	}
	return err
}
