package h2client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// readReadier is a body that tells whether a Read would return at once.
type readReadier interface{ ReadReady() bool }

// stream is one request's state. Everything in it is guarded by the
// connection's mu.
type stream struct {
	cc   *Conn
	id   uint32
	req  *http.Request
	cond sync.Cond // L = &cc.mu: response, data or an end arrived

	// Receiving.
	resp      *http.Response
	n1xx      int
	buf       []byte // received body bytes; buf[off:] is not read yet
	off       int
	recvEnded bool  // END_STREAM received
	rerr      error // the stream failed: reset, connection lost, cancelled
	trailer   http.Header
	inflow    int64   // bytes the server may still send on the stream
	unacked   int64   // read, not yet returned with WINDOW_UPDATE
	window    int64   // the stream's window: inflow, unread and unacked bytes together
	sinceGrow int64   // read since the window last grew
	bodyDone  bool    // the response body was closed by the caller
	lastRead  uint64  // the connection's readClock when last read, or when bytes came to an empty buffer
	dropped   bool    // its unread bytes were dropped for the buffer limit
	holding   bool    // on the connection's list of streams with unread bytes
	hprev     *stream // that list
	hnext     *stream

	// A RoundTripFields response's header and trailer fields (copies).
	fresp         FieldResponse
	trailerFields []hpack.HeaderField

	head bool          // a HEAD request: the response has no body
	freq *FieldRequest // a RoundTripFields request, when req is nil

	// Sending.
	sendWin int64
	sentEnd bool // END_STREAM sent
	reset   bool // RST_STREAM sent or received: nothing more is written
	removed bool
	stopCtx func() bool
	reqBody io.ReadCloser // the body sendBody reads, closed on reset

	// The request's checked header, the response and its body live in
	// the stream: one allocation per request instead of four. Nothing is
	// pooled, so a caller that keeps the response keeps this stream's
	// memory, never another request's.
	hdr      reqHeaders
	respVal  http.Response
	respBody body
}

// RoundTrip sends req and returns the response once its headers arrive.
// The request's URL scheme, host and path, Host, Method, Header, Body and
// Trailer are sent; its context cancels the stream. The body is closed
// when sent or on failure. A request whose stream was never processed by
// the server fails with an error wrapping [ErrUnprocessed].
func (cc *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	cs := &stream{cc: cc, req: req, head: req.Method == http.MethodHead}
	if err := cc.start(cs, req.Context(), req.Body); err != nil {
		return nil, err
	}
	return cc.awaitResponse(cs)
}

// start sends a request's HEADERS, and its body when it is all there;
// a goroutine streams the rest (sendBody).
func (cc *Conn) start(cs *stream, ctx context.Context, body io.ReadCloser) error {
	if body == http.NoBody {
		body = nil
	}
	closeBody := func() {
		if body != nil {
			body.Close()
		}
	}
	// A client request's ContentLength 0 with a body means unknown.
	hasBody := body != nil
	trailers := cs.req != nil && hasTrailers(cs.req)
	cs.cond.L = &cc.mu

	// The fast path: read what the body already has, so that headers,
	// data and the end go out in one write.
	var first []byte
	var firstEOF bool
	var bufp *[]byte
	if hasBody {
		if rr, ok := body.(readReadier); ok && rr.ReadReady() {
			bufp = getBuf()
			first, firstEOF = readReady(body, rr, (*bufp)[:0])
			if firstEOF && len(first) == 0 && !trailers {
				hasBody = false
			}
		}
	}
	defer func() {
		if bufp != nil {
			putBuf(bufp)
		}
	}()

	hdr := &cs.hdr
	var err error
	if cs.req != nil {
		err = cc.encodeRequest(hdr, cs.req, hasBody)
	} else {
		err = cc.encodeFieldRequest(hdr, cs.freq, hasBody)
	}
	if err != nil {
		closeBody()
		return err
	}
	if err := cc.acquire(ctx); err != nil {
		closeBody()
		return err
	}

	// Headers, and the body when it is all there, in one flush.
	if err := cc.lockWrite(); err != nil {
		cc.release()
		closeBody()
		return fmt.Errorf("h2client: connection lost: %w: %w", err, ErrUnprocessed)
	}
	cc.mu.Lock()
	if cc.closing || cc.closed || cc.nextID > maxStreamID {
		cc.mu.Unlock()
		cc.wmu.Unlock()
		cc.release()
		closeBody()
		return errClosing
	}
	cs.id = cc.nextID
	cc.nextID += 2
	if cc.nextID > maxStreamID {
		cc.closing = true
	}
	cs.sendWin = int64(cc.peerInitWin)
	cs.inflow = int64(cc.cfg.initialWindow)
	cs.window = cs.inflow
	// A new stream counts as just read: of the streams never read, the
	// oldest goes first.
	cc.readClock++
	cs.lastRead = cc.readClock
	cs.sentEnd = !hasBody
	cc.streams[cs.id] = cs
	maxFrame := int(cc.peerMaxFrame)
	cc.mu.Unlock()

	cc.hbuf.b = cc.hbuf.b[:0]
	var block []byte
	block, err = cc.encodeHeaderBlock(hdr)
	if err == nil {
		err = cc.writeHeaderBlock(cs.id, block, !hasBody, maxFrame)
	}
	done := !hasBody
	if err == nil && hasBody && (len(first) > 0 || firstEOF) {
		var sent int
		sent, done, err = cc.writeDataLocked(cs, first, firstEOF, maxFrame)
		first = first[sent:]
	}
	cc.flushLocked()
	if err != nil {
		cc.failStream(cs, err, http2.ErrCodeInternal)
		closeBody()
		return err
	}
	if hasBody && !done {
		// The rest of the body is sent by a goroutine: the response
		// may come before the body ends.
		rest := append([]byte(nil), first...)
		go cc.sendBody(cs, body, rest, firstEOF)
		body = nil
	} else {
		closeBody()
	}
	if ctx.Done() != nil {
		cc.mu.Lock()
		if !cs.removed {
			cs.stopCtx = context.AfterFunc(ctx, func() { cc.cancelStream(cs, ctx) })
		}
		cc.mu.Unlock()
	}
	return nil
}

// hasTrailers reports whether req declares trailers to send.
func hasTrailers(req *http.Request) bool { return len(req.Trailer) > 0 }

// readReady reads from body while it says a read would not block, up to
// the buffer's capacity; it reports whether the body ended.
func readReady(body io.Reader, rr readReadier, b []byte) ([]byte, bool) {
	for len(b) < cap(b) {
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, true
		}
		if err != nil || n == 0 || !rr.ReadReady() {
			// An error is read again by sendBody.
			return b, false
		}
	}
	return b, false
}

// acquire takes a stream slot: a reservation, or one free under the
// server's MAX_CONCURRENT_STREAMS (waiting for it). Until the server's
// SETTINGS have arrived only one stream is open at a time, so that a
// server whose limit is lower than the 100 assumed meanwhile never has to
// refuse streams; its SETTINGS follow its preface at once.
func (cc *Conn) acquire(ctx context.Context) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	reserved := cc.reserved > 0
	if reserved {
		cc.reserved--
	}
	var stop func() bool
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	for !cc.closing && !cc.closed &&
		(!reserved && cc.active >= cc.maxStreams || !cc.seenSettings && cc.active >= 1) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("h2client: waiting for a stream: %w", err)
		}
		if stop == nil && ctx.Done() != nil {
			stop = context.AfterFunc(ctx, func() {
				cc.mu.Lock()
				cc.cond.Broadcast()
				cc.mu.Unlock()
			})
		}
		cc.cond.Wait()
	}
	if cc.closing || cc.closed {
		return errClosing
	}
	cc.active++
	return nil
}

// release gives back a slot whose stream never started.
func (cc *Conn) release() {
	cc.mu.Lock()
	cc.active--
	cc.becameIdleLocked()
	cc.cond.Broadcast()
	cc.mu.Unlock()
}

func (cc *Conn) becameIdleLocked() {
	if cc.active == 0 {
		cc.lastIdle = time.Now()
		if cc.closing && cc.gotGoAway && !cc.closed {
			go cc.shut(errors.New("h2client: connection closed after GOAWAY"))
		}
	}
}

// awaitResponse waits for the response headers or the stream's failure.
func (cc *Conn) awaitResponse(cs *stream) (*http.Response, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for cs.resp == nil && cs.rerr == nil {
		cs.cond.Wait()
	}
	if cs.resp != nil {
		return cs.resp, nil
	}
	return nil, cs.rerr
}

// cancelStream ends a stream whose request context is done.
func (cc *Conn) cancelStream(cs *stream, ctx context.Context) {
	cc.failStream(cs, fmt.Errorf("h2client: request cancelled: %w", context.Cause(ctx)), http2.ErrCodeCancel)
}

// failStream ends a stream with err, resetting it with code unless it is
// already finished both ways.
func (cc *Conn) failStream(cs *stream, err error, code http2.ErrCode) {
	cc.mu.Lock()
	if cs.removed || cs.reset {
		cc.mu.Unlock()
		return
	}
	send := !(cs.recvEnded && cs.sentEnd)
	cs.reset = true
	if cs.rerr == nil {
		cs.rerr = err
	}
	cc.removeLocked(cs)
	cc.mu.Unlock()
	if send {
		_ = cc.writeControl(func() error { return cc.fr.WriteRSTStream(cs.id, code) })
	}
	cs.closeReqBody()
}

// removeLocked forgets a stream that ended both ways or was reset, and
// drops its unread bytes once the caller closed the body.
func (cc *Conn) removeLocked(cs *stream) {
	if cs.removed {
		return
	}
	cs.removed = true
	if cs.stopCtx != nil {
		cs.stopCtx()
	}
	delete(cc.streams, cs.id)
	if cs.bodyDone {
		cc.dropBufLocked(cs)
	}
	cc.active--
	cc.becameIdleLocked()
	cs.cond.Broadcast()
	cc.cond.Broadcast()
}

// dropBufLocked discards a stream's unread bytes (their connection
// credit was returned when they arrived).
func (cc *Conn) dropBufLocked(cs *stream) {
	cc.buffered -= int64(len(cs.buf) - cs.off)
	cc.unholdLocked(cs)
	cs.buf, cs.off = nil, 0
}

// holdLocked puts cs on the list of streams with unread bytes.
func (cc *Conn) holdLocked(cs *stream) {
	if cs.holding {
		return
	}
	cs.holding = true
	// Bytes arriving to an empty buffer count as a sign of life, as a
	// read does: the stream to lose its bytes is the one whose unread
	// bytes have waited longest, not one opened earlier whose first
	// bytes have only just come (a victim's request must not lose to
	// streams an attacker opened after it and never reads).
	cc.readClock++
	cs.lastRead = cc.readClock
	cs.hprev, cs.hnext = nil, cc.holders
	if cc.holders != nil {
		cc.holders.hprev = cs
	}
	cc.holders = cs
}

// unholdLocked takes cs off that list.
func (cc *Conn) unholdLocked(cs *stream) {
	if !cs.holding {
		return
	}
	cs.holding = false
	if cs.hprev != nil {
		cs.hprev.hnext = cs.hnext
	} else {
		cc.holders = cs.hnext
	}
	if cs.hnext != nil {
		cs.hnext.hprev = cs.hprev
	}
	cs.hprev, cs.hnext = nil, nil
}

// evictLocked keeps the unread bytes of all streams within the buffer
// limit: while they are over it, the stream whose reader has gone
// longest without reading (or, never read, whose unread bytes came
// first) loses its bytes and fails. A stream nobody reads is the first to go; one read
// all along, however slowly, was read more recently. The streams to
// reset are returned, to be reset without mu.
func (cc *Conn) evictLocked() []*stream {
	var gone []*stream
	for cc.buffered > cc.cfg.bufferLimit && cc.holders != nil {
		victim := cc.holders
		for cs := victim.hnext; cs != nil; cs = cs.hnext {
			if cs.lastRead < victim.lastRead {
				victim = cs
			}
		}
		cc.countError("buffer_limit")
		victim.dropped = true
		if victim.rerr == nil {
			victim.rerr = fmt.Errorf("h2client: response body not read: its %d unread bytes were dropped, the connection holding its limit of %d", len(victim.buf)-victim.off, cc.cfg.bufferLimit)
		}
		cc.dropBufLocked(victim)
		victim.cond.Broadcast()
		if !victim.removed {
			gone = append(gone, victim)
		}
	}
	return gone
}

// maybeRemoveLocked removes a stream finished both ways.
func (cc *Conn) maybeRemoveLocked(cs *stream) {
	if cs.recvEnded && cs.sentEnd {
		cc.removeLocked(cs)
	}
}
