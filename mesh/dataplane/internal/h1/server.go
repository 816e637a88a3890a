package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server serves HTTP/1.1 requests on connections handed to ServeConn.
type Server struct {
	// Handler answers each request. Its ResponseWriter implements
	// http.Flusher and http.Hijacker.
	Handler http.Handler
	// Limits bound request heads.
	Limits Limits
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request (default one minute).
	IdleTimeout time.Duration
	// HeaderTimeout is how long a request head may take once its first
	// byte arrived (default 10s).
	HeaderTimeout time.Duration
	// OnRefused, if set, is told of every request refused by ReadRequest,
	// with the connection's context.
	OnRefused func(ctx context.Context, err error)
}

// maxDrain bounds the unread request body the server reads away to keep
// a connection alive after its handler returned.
const maxDrain = 256 << 10

var aLongTimeAgo = time.Unix(1, 0)

// ServeConn serves requests on c until the client closes it, a request is
// refused, a response requires closing, or ctx is cancelled: then an idle
// connection is closed at once and a busy one after its current exchange.
// Requests get a context with ctx's values that is cancelled when the
// client goes away, not when ctx is. ServeConn closes c unless a handler
// hijacked it.
func (s *Server) ServeConn(ctx context.Context, c net.Conn) {
	sc := &serverConn{s: s, c: c, pc: &pushbackConn{Conn: c}}
	sc.br = bufio.NewReaderSize(sc.pc, 4096)
	sc.bw = bufio.NewWriterSize(c, 4096)
	if !sc.serve(ctx) {
		return
	}
	c.Close()
}

type serverConn struct {
	s  *Server
	c  net.Conn
	pc *pushbackConn
	br *bufio.Reader
	bw *bufio.Writer

	remote string // c.RemoteAddr(), formatted once

	wmu sync.Mutex // guards bw between the handler and 100 Continue

	// waitMu guards the wait for the next request: only that read is
	// cut short, by the end of the serving context or the idle timer.
	waitMu    sync.Mutex
	waiting   bool
	cut       bool // the wait's read deadline was moved to the past
	ended     bool // serve returned: the timer and watch leave c alone
	waitSince time.Time
	waitLimit time.Duration
	idleTimer *time.Timer // bounds waits after the first (idleDue)

	bgMu      sync.Mutex
	bgTimer   *time.Timer // armed while bgArmed; re-armed lazily
	bgArmed   bool
	bgWant    bool      // the current request asked for the watch
	bgStart   time.Time // when it asked
	bgDone    chan struct{}
	bgClosed  bool // no new background reads (the handler returned)
	bgCancel  context.CancelFunc
	bgAborted bool
}

func (sc *serverConn) idle() time.Duration {
	if sc.s.IdleTimeout > 0 {
		return sc.s.IdleTimeout
	}
	return time.Minute
}

func (sc *serverConn) headerTimeout() time.Duration {
	if sc.s.HeaderTimeout > 0 {
		return sc.s.HeaderTimeout
	}
	return 10 * time.Second
}

// serve runs the request loop; it returns false when the connection was
// hijacked.
func (sc *serverConn) serve(ctx context.Context) bool {
	base := context.WithoutCancel(ctx)
	sc.remote = sc.c.RemoteAddr().String()
	// One watch per connection, not per request: the end of ctx cuts
	// the wait for the next request short, never an exchange.
	stop := context.AfterFunc(ctx, func() {
		sc.waitMu.Lock()
		sc.cutWaitLocked()
		sc.waitMu.Unlock()
	})
	defer func() {
		stop()
		sc.waitMu.Lock()
		sc.ended = true
		if sc.idleTimer != nil {
			sc.idleTimer.Stop()
		}
		sc.waitMu.Unlock()
	}()
	for first := true; ; first = false {
		if ctx.Err() != nil && sc.br.Buffered() == 0 {
			return true
		}
		// A read deadline costs a runtime timer update each time it is
		// set (and at low rates a scheduler wake-up): the wait for a
		// kept-alive connection's next request is bounded by one timer
		// per connection instead (idleDue), and a deadline is set only
		// for the first request and a head not yet all buffered, and
		// cleared once before the handler runs.
		deadline := false
		if sc.br.Buffered() == 0 {
			wait := sc.idle()
			if first {
				wait = sc.headerTimeout()
				_ = sc.c.SetReadDeadline(time.Now().Add(wait))
				deadline = true
			}
			sc.beginWait(wait, !first)
			if ctx.Err() != nil {
				// Ended between the check above and beginWait: the
				// watch may have run before the wait began.
				sc.endWait()
				return true
			}
			_, err := sc.br.Peek(1)
			if sc.endWait() || err != nil {
				// Cut short (idle timeout, shutdown) or failed: a
				// request that arrived meanwhile is not served, its
				// read deadline being in the past.
				return true
			}
		}
		if !headBuffered(sc.br) {
			_ = sc.c.SetReadDeadline(time.Now().Add(sc.headerTimeout()))
			deadline = true
		}
		req, err := ReadRequest(sc.br, sc.s.Limits)
		if err != nil {
			if st := StatusOf(err); st != 0 {
				if sc.s.OnRefused != nil {
					sc.s.OnRefused(ctx, err)
				}
				msg := err.Error()
				var e *Error
				if errors.As(err, &e) {
					msg = e.Reason
				}
				sc.writeError(st, msg)
			}
			return true
		}
		if deadline {
			_ = sc.c.SetReadDeadline(time.Time{})
		}

		reqCtx, cancel := context.WithCancel(base)
		req = req.WithContext(reqCtx)
		req.RemoteAddr = sc.remote
		w := &response{sc: sc, req: req, header: make(http.Header, 8), draining: ctx.Err() != nil}

		sc.bgMu.Lock()
		sc.bgClosed, sc.bgWant, sc.bgCancel = false, false, cancel
		sc.bgMu.Unlock()
		body, sized := req.Body.(*Body)
		if sized {
			body.onEOF = sc.watchClient
			if ex := req.Header["Expect"]; len(ex) > 0 {
				body.onRead = w.sendContinue
			}
		} else {
			sc.watchClient()
		}

		ok := sc.runHandler(w, req)

		if w.hijacked {
			cancel()
			return false
		}
		if !ok {
			// The handler aborted (or panicked): the exchange cannot end
			// cleanly, so the connection ends here.
			sc.stopBackgroundRead()
			cancel()
			return true
		}
		sc.stopBackgroundRead()
		w.finish()
		cancel()
		if w.closeAfter || req.Close || w.err != nil {
			return true
		}
		if sized && !body.sawEOF() {
			_ = sc.c.SetReadDeadline(time.Now().Add(time.Second))
			ok := body.drain(maxDrain)
			_ = sc.c.SetReadDeadline(time.Time{})
			if !ok {
				return true
			}
		}
	}
}

// beginWait marks the loop as waiting up to limit for the next request;
// timed says that the idle timer (not a read deadline) bounds the wait.
func (sc *serverConn) beginWait(limit time.Duration, timed bool) {
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	sc.waiting, sc.cut = true, false
	sc.waitSince, sc.waitLimit = time.Now(), limit
	if timed && sc.idleTimer == nil {
		sc.idleTimer = time.AfterFunc(limit, sc.idleDue)
	}
}

// endWait ends the wait and reports whether it was cut short.
func (sc *serverConn) endWait() bool {
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	sc.waiting = false
	return sc.cut
}

// cutWaitLocked moves the read deadline to the past when the loop waits
// for a request, so that the wait ends. sc.waitMu is held.
func (sc *serverConn) cutWaitLocked() {
	if sc.waiting && !sc.cut && !sc.ended {
		sc.cut = true
		_ = sc.c.SetReadDeadline(aLongTimeAgo)
	}
}

// idleDue runs when the idle timer fires: it ends a wait that has lasted
// its limit, and otherwise re-arms the timer for the rest of the current
// wait or, during an exchange, for a whole idle timeout. So a busy
// connection costs one timer firing per idle timeout, not a timer update
// per request.
func (sc *serverConn) idleDue() {
	sc.waitMu.Lock()
	defer sc.waitMu.Unlock()
	if sc.ended {
		return
	}
	next := sc.idle()
	if sc.waiting {
		if next = sc.waitLimit - time.Since(sc.waitSince); next <= 0 {
			sc.cutWaitLocked()
			return
		}
	}
	sc.idleTimer.Reset(next)
}

// headBuffered reports whether br holds a whole request head (up to its
// CRLF CRLF), so that reading it cannot block. Anything else (a partial
// head, other line ends) is read under the header deadline.
func headBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.Contains(b, crlfcrlf)
}

var crlfcrlf = []byte("\r\n\r\n")

// runHandler runs the handler, turning a panic (http.ErrAbortHandler or
// any other) into an aborted exchange.
func (sc *serverConn) runHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
		}
	}()
	sc.s.Handler.ServeHTTP(w, req)
	return true
}

// clientWatchDelay is how long a request runs before the server starts
// watching its connection for the client going away: quick exchanges
// never pay for the watch.
const clientWatchDelay = 50 * time.Millisecond

// watchClient arms the client watch for the current request: it starts
// clientWatchDelay from now unless the request ended first. The timer is
// not reset and stopped per request (a runtime timer update each, and at
// low rates a scheduler wake-up): one still pending from an earlier
// request is left to fire, and re-armed then for what remains of this
// request's delay.
func (sc *serverConn) watchClient() {
	sc.bgMu.Lock()
	defer sc.bgMu.Unlock()
	if sc.bgClosed {
		return
	}
	sc.bgWant, sc.bgStart = true, time.Now()
	if sc.bgArmed {
		return
	}
	sc.bgArmed = true
	if sc.bgTimer == nil {
		sc.bgTimer = time.AfterFunc(clientWatchDelay, sc.clientWatchDue)
		return
	}
	sc.bgTimer.Reset(clientWatchDelay)
}

// clientWatchDue runs when the watch timer fires: it starts the watch if
// a request has waited clientWatchDelay since it asked for one, re-arms
// the timer for a request that asked later, and lets it rest when no
// request is running.
func (sc *serverConn) clientWatchDue() {
	sc.bgMu.Lock()
	defer sc.bgMu.Unlock()
	if sc.bgClosed || !sc.bgWant {
		sc.bgArmed = false
		return
	}
	if left := clientWatchDelay - time.Since(sc.bgStart); left > 0 {
		sc.bgTimer.Reset(left)
		return
	}
	sc.bgArmed = false
	sc.startBackgroundReadLocked()
}

// startBackgroundReadLocked watches the idle connection for the client
// going away once the request body has been read: a read error cancels
// the request; a byte read early (a pipelined request) is kept for later.
// sc.bgMu is held.
func (sc *serverConn) startBackgroundReadLocked() {
	if sc.bgClosed || sc.bgDone != nil || sc.br.Buffered() > 0 || sc.pc.has {
		return
	}
	done := make(chan struct{})
	sc.bgDone, sc.bgAborted = done, false
	cancel := sc.bgCancel
	go func() {
		defer close(done)
		var one [1]byte
		n, err := sc.pc.Conn.Read(one[:])
		sc.bgMu.Lock()
		aborted := sc.bgAborted
		sc.bgMu.Unlock()
		if n == 1 {
			sc.pc.b, sc.pc.has = one[0], true
		}
		if err != nil && !aborted {
			sc.pc.err = err
			cancel()
		}
	}()
}

// stopBackgroundRead ends the watch and forbids new ones for this request.
func (sc *serverConn) stopBackgroundRead() {
	sc.bgMu.Lock()
	sc.bgClosed = true
	done := sc.bgDone
	if done != nil {
		sc.bgAborted = true
	}
	sc.bgMu.Unlock()
	if done == nil {
		return
	}
	_ = sc.c.SetReadDeadline(aLongTimeAgo)
	<-done
	_ = sc.c.SetReadDeadline(time.Time{})
	sc.bgMu.Lock()
	sc.bgDone = nil
	sc.bgMu.Unlock()
}

func (sc *serverConn) writeError(status int, msg string) {
	body := http.StatusText(status) + ": " + msg + "\n"
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	fmt.Fprintf(sc.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	_ = sc.bw.Flush()
}

// pushbackConn returns a byte read early by the background read first,
// and the error that read saw.
type pushbackConn struct {
	net.Conn
	b   byte
	has bool
	err error
}

// NetConn returns the wrapped connection.
func (p *pushbackConn) NetConn() net.Conn { return p.Conn }

func (p *pushbackConn) Read(b []byte) (int, error) {
	if p.has {
		if len(b) == 0 {
			return 0, nil
		}
		b[0] = p.b
		p.has = false
		return 1, nil
	}
	if p.err != nil {
		return 0, p.err
	}
	return p.Conn.Read(b)
}

// response is the http.ResponseWriter of one exchange.
type response struct {
	sc       *serverConn
	req      *http.Request
	header   http.Header
	draining bool

	wroteHeader bool
	status      int
	noBody      bool
	chunked     bool
	cl          int64 // -1: not sized
	written     int64
	closeAfter  bool
	hijacked    bool
	sent100     bool
	err         error
}

// Header returns the response header.
func (w *response) Header() http.Header { return w.header }

// WriteHeader sends the status line and header. A 1xx status other than
// 101 sends an informational response and may be followed by others.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader || w.hijacked {
		return
	}
	if code < 100 || code > 999 {
		code = http.StatusInternalServerError
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if code >= 100 && code < 200 {
		if code == http.StatusSwitchingProtocols {
			return // only through Hijack
		}
		if code == http.StatusContinue {
			if w.sent100 {
				return
			}
			w.sent100 = true
		}
		writeStatus(sc.bw, code)
		w.err = writeFields(sc.bw, w.header, nil)
		if err := sc.bw.Flush(); err != nil {
			w.err = err
		}
		return
	}
	w.wroteHeader, w.status = true, code
	w.cl = -1
	if v := w.header["Content-Length"]; len(v) == 1 {
		if n, ok := parseContentLength(v[0]); ok {
			w.cl = n
		}
	}
	if w.cl < 0 {
		delete(w.header, "Content-Length")
	}
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
	closeAsked := false
	for _, t := range ConnectionTokens(w.header) {
		closeAsked = closeAsked || t == "close"
	}
	if b, ok := w.req.Body.(*Body); ok && b.failed.Load() {
		// The request body broke off or was malformed: the connection
		// cannot carry another request, and the answer says so.
		closeAsked = true
	}
	w.closeAfter = w.req.Close || w.draining || closeAsked
	switch {
	case w.noBody:
	case w.cl >= 0:
	case w.req.ProtoMinor == 1:
		w.chunked = true
	default:
		w.closeAfter = true
	}
	if code == http.StatusNoContent || code == http.StatusNotModified {
		delete(w.header, "Content-Length")
		w.cl = -1
	}

	writeStatus(sc.bw, code)
	var extra []string
	if w.chunked {
		extra = append(extra, "Transfer-Encoding: chunked")
		if tr := w.declaredTrailers(); len(tr) > 0 {
			extra = append(extra, "Trailer: "+strings.Join(tr, ", "))
		}
	}
	switch {
	case w.closeAfter:
		extra = append(extra, "Connection: close")
	case w.req.ProtoMinor == 0:
		extra = append(extra, "Connection: keep-alive")
	}
	w.err = writeFields(sc.bw, w.header, extra)
}

func writeStatus(bw *bufio.Writer, code int) {
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(code))
	bw.WriteByte(' ')
	bw.WriteString(text)
	bw.WriteString("\r\n")
}

// writeFields writes h without hop-by-hop, trailer-announcement and
// invalid fields, then the extra lines and the blank line.
func writeFields(bw *bufio.Writer, h http.Header, extra []string) error {
	for k, vs := range h {
		if skipOnWrite(k) {
			continue
		}
		for _, v := range vs {
			if !ValidHeader(k, v) {
				continue
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	for _, e := range extra {
		bw.WriteString(e)
		bw.WriteString("\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

func skipOnWrite(k string) bool {
	if strings.HasPrefix(k, http.TrailerPrefix) {
		return true
	}
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Http2-Settings":
		return true
	}
	return false
}

func (w *response) declaredTrailers() []string {
	var out []string
	for _, v := range w.header["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" && ValidName(k) {
				out = append(out, http.CanonicalHeaderKey(k))
			}
		}
	}
	return out
}

// ErrBodyNotAllowed is returned by Write for responses that have no body.
var ErrBodyNotAllowed = errors.New("h1: response to this request or with this status has no body")

// ErrContentLength is returned by Write beyond the declared length.
var ErrContentLength = errors.New("h1: wrote more than the declared Content-Length")

// Write writes body bytes, framed as the header announced.
func (w *response) Write(p []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		return 0, ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	var err error
	switch {
	case w.cl >= 0:
		if left := w.cl - w.written; int64(len(p)) > left {
			n, _ := sc.bw.Write(p[:left])
			w.written += int64(n)
			return n, ErrContentLength
		}
		_, err = sc.bw.Write(p)
	case w.chunked:
		sc.bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		sc.bw.WriteString("\r\n")
		sc.bw.Write(p)
		_, err = sc.bw.WriteString("\r\n")
	default:
		_, err = sc.bw.Write(p)
	}
	if err != nil {
		w.err = err
		return 0, err
	}
	w.written += int64(len(p))
	return len(p), nil
}

// Flush sends what is buffered.
func (w *response) Flush() {
	if w.hijacked {
		return
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sc.wmu.Lock()
	if err := w.sc.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	w.sc.wmu.Unlock()
}

// FlushError is Flush reporting the write error.
func (w *response) FlushError() error {
	w.Flush()
	return w.err
}

// sendContinue answers Expect: 100-continue when the handler first reads
// the body, unless the final response already started.
func (w *response) sendContinue() {
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if w.wroteHeader || w.sent100 || w.hijacked {
		return
	}
	w.sent100 = true
	sc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	_ = sc.bw.Flush()
}

// finish ends the response: the last chunk with trailers, or a check that
// a sized body was complete.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	sc := w.sc
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if w.chunked && w.err == nil {
		sc.bw.WriteString("0\r\n")
		tr := http.Header{}
		for _, k := range w.declaredTrailers() {
			if vs := w.header[k]; len(vs) > 0 {
				tr[k] = vs
			}
		}
		for k, vs := range w.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && name != "" {
				tr[http.CanonicalHeaderKey(name)] = vs
			}
		}
		for k := range tr {
			if forbiddenTrailer(k) {
				delete(tr, k)
			}
		}
		w.err = writeFields(sc.bw, tr, nil)
	}
	if w.cl >= 0 && !w.noBody && w.written < w.cl {
		w.closeAfter = true
	}
	if err := sc.bw.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

// Hijack hands the connection to the caller (for a protocol switch). The
// ReadWriter's reader holds bytes the client already sent.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijacked {
		return nil, nil, http.ErrHijacked
	}
	if w.wroteHeader {
		return nil, nil, errors.New("h1: hijack after the response started")
	}
	sc := w.sc
	sc.stopBackgroundRead()
	w.hijacked = true
	sc.wmu.Lock()
	err := sc.bw.Flush()
	sc.wmu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	return sc.pc, bufio.NewReadWriter(sc.br, sc.bw), nil
}

// WriteResponseHead writes a status line and header fields (without
// hop-by-hop or invalid ones, plus the extra lines given verbatim), for a
// hijacked connection such as a 101 Switching Protocols answer.
func WriteResponseHead(w io.Writer, code int, h http.Header, extra ...string) error {
	bw := bufio.NewWriter(w)
	writeStatus(bw, code)
	if err := writeFields(bw, h, extra); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteRequestHead writes an HTTP/1.1 request line and header fields for
// a request without a body (an upgrade), with Host first. Hop-by-hop and
// invalid fields are skipped; extra lines are written verbatim.
func WriteRequestHead(w io.Writer, method, target, host string, h http.Header, extra ...string) error {
	if !validMethod(method) || checkTarget(method, target) != nil || !validHost(host) {
		return errors.New("h1: invalid request line or host")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(target)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if err := writeFields(bw, h, extra); err != nil {
		return err
	}
	return bw.Flush()
}
