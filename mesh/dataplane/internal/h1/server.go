package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
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
