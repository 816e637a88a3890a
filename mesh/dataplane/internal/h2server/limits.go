package h2server

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// The server's own limits against hostile clients. Every count is taken
// in the frame loop as a frame is read, or where the server decides to
// send a frame of its own (a reset, an acknowledgement, a window
// update), never where bytes happen to be written: a client that does
// not read is counted like one that does. Nothing here allocates.
const (
	// Premature resets: a stream reset less than prematureWindow after
	// it opened counts against Config.ResetBudget.
	prematureWindow = time.Second
	recentStreams   = 256 // streams whose opening time is remembered

	// Control frames (SETTINGS, PRIORITY, PING acknowledgements, unpaced
	// PINGs, WINDOW_UPDATEs that restore no used window, unknown frame
	// types): a leaky bucket.
	controlBucket = 1000
	controlRate   = 1000 // per second

	// PINGs sent while every earlier PING's acknowledgement has been
	// written (a client that waits for each answer) have their own
	// bucket, drained slowly by time and by one for every DATA frame the
	// server sends: grpc-go's bandwidth estimator pings once per round
	// trip while it receives DATA, thousands of times a second on a fast
	// link, and earns each PING with the DATA that prompted it. Time
	// alone cannot tell such a client from a flood: over TLS, where each
	// frame can arrive in its own record, the server answers each PING
	// of a flood before it reads the next. The standing allowance only
	// has to cover keepalives (grpc-go allows one per 10 s at most) and
	// PINGs that run ahead of the DATA credited for them; a flooder
	// reconnecting gets no more than it per connection.
	pacedPingBucket = 256
	pacedPingRate   = 100 // per second

	// Once ackHoldAfter paced PINGs are in the bucket (the client pings
	// faster than the DATA it receives earns), the acknowledgements that
	// are all the server has to write wait up to ackHoldFor for the next
	// ones, so that a flood over TLS, one PING per record, costs one
	// write per batch instead of one per PING. A client within its
	// allowance (keepalives, gRPC's bandwidth estimator) is never held.
	ackHoldAfter = 32
	ackHoldFor   = 2 * time.Millisecond

	// Empty frames (DATA without END_STREAM, HEADERS and CONTINUATION
	// without payload).
	emptyBucket = 100
	emptyRate   = 10 // per second

	// maxContinuations is the longest run of CONTINUATION frames in one
	// header block (the header list size is bounded separately).
	maxContinuations = 64

	// minWindowIncrement is the smallest WINDOW_UPDATE that restores
	// used window for free; a smaller one is free when it restores the
	// whole window, or when DATA frames the server sent earned it.
	minWindowIncrement = 1024
	// smallUpdatesPerData is how many small WINDOW_UPDATEs one DATA
	// frame the server sends earns (one for its stream, one for the
	// connection: a client may return each frame's bytes as it takes
	// them, as grpc-go does on the connection before each bandwidth
	// PING), and smallUpdateBank the most a connection keeps unspent.
	smallUpdatesPerData = 2
	smallUpdateBank     = 4096

	// The server's own frames (resets, acknowledgements, window updates,
	// GOAWAY) queued while another goroutine is writing: past either
	// bound the client is provoking answers faster than it takes them,
	// and the connection ends.
	maxQueuedControlFrames = 1024
	maxQueuedControlBytes  = 32 << 10
)

// limits is one connection's flood and reset accounting; fields are
// guarded by the connection's mu, except contRun (read loop).
type limits struct {
	resets   int // premature resets
	streams  int // streams opened
	recent   [recentStreams]opened
	control  bucket
	paced    bucket
	empty    bucket
	pingsOut int // the client's PINGs whose acknowledgements are not yet written
	acksHeld int // of those, queued acknowledgements the server holds back itself (holdAcksLocked)
	// closedUsed is the send window that streams since closed had used
	// and the client had not yet given back when they closed: a client
	// returns a stream's window as it reads, often after the server's
	// last frame, so WINDOW_UPDATEs on closed streams restoring it are
	// what a reader sends.
	closedUsed int64
	evicted    [16]uint32 // the last streams reset for BufferLimit
	evictedAt  int
	small      int // small WINDOW_UPDATEs earned by DATA frames sent
	contRun    int // CONTINUATION frames in the block being read
}

// opened is when a stream opened.
type opened struct {
	id uint32
	at time.Time
}

func (l *limits) init() {
	l.control = bucket{capacity: controlBucket, rate: controlRate}
	l.paced = bucket{capacity: pacedPingBucket, rate: pacedPingRate}
	l.empty = bucket{capacity: emptyBucket, rate: emptyRate}
}

// bucket is a leaky bucket: take fails when capacity frames arrived
// faster than rate per second drains them.
type bucket struct {
	capacity float64
	rate     float64
	level    float64
	last     time.Time
}

func (b *bucket) take() bool {
	now := time.Now()
	if !b.last.IsZero() {
		b.level -= now.Sub(b.last).Seconds() * b.rate
		if b.level < 0 {
			b.level = 0
		}
	}
	b.last = now
	if b.level+1 > b.capacity {
		return false
	}
	b.level++
	return true
}

// credit takes one frame out of the bucket.
func (b *bucket) credit() {
	if b.level >= 1 {
		b.level--
	}
}

// accountLocked counts a frame the client sent against the buckets.
func (c *conn) accountLocked(f http2.Frame) {
	switch f := f.(type) {
	case *http2.DataFrame:
		if f.Length == 0 && !f.StreamEnded() {
			c.takeEmptyLocked()
		}
	case *http2.HeadersFrame:
		if f.Length == 0 && !f.HeadersEnded() {
			c.takeEmptyLocked()
		}
	case *http2.PingFrame:
		switch {
		case f.IsAck():
			c.takeControlLocked()
		case c.lim.pingsOut > c.lim.acksHeld:
			// An acknowledgement the server did not hold back is still
			// unwritten: the client pings without waiting for answers.
			c.takeControlLocked()
			c.lim.pingsOut++
		default:
			if !c.lim.paced.take() {
				c.abuseLocked("http2-control-flood", http2.ErrCodeEnhanceYourCalm)
			}
			c.lim.pingsOut++
		}
	case *http2.SettingsFrame, *http2.PriorityFrame, *http2.UnknownFrame:
		c.takeControlLocked()
	}
}

func (c *conn) takeControlLocked() {
	if !c.lim.control.take() {
		c.abuseLocked("http2-control-flood", http2.ErrCodeEnhanceYourCalm)
	}
}

func (c *conn) takeEmptyLocked() {
	if !c.lim.empty.take() {
		c.abuseLocked("http2-empty-frames", http2.ErrCodeEnhanceYourCalm)
	}
}

// windowUpdateLocked counts a WINDOW_UPDATE of inc on a send window that
// held before and has been as large as *peak. Restoring window the
// server used (in steps of at least minWindowIncrement, or all of it, or
// in smaller steps that DATA frames sent earned) is what a client
// reading our DATA does, and is free; raising the window past its peak
// or dribbling it out in tiny steps counts as a control frame.
func (c *conn) windowUpdateLocked(before, inc int64, peak *int64) {
	after := before + inc
	free := before < *peak && (inc >= minWindowIncrement || after >= *peak || c.takeSmallLocked())
	if after > *peak {
		*peak = after
	}
	if !free {
		c.takeControlLocked()
	}
}

// closedWindowUpdateLocked counts a WINDOW_UPDATE of inc on a stream
// already closed: free while it restores window that closed streams
// used (closedUsed), by the rule of windowUpdateLocked.
func (c *conn) closedWindowUpdateLocked(inc int64) {
	used := c.lim.closedUsed
	free := used > 0 && (inc >= minWindowIncrement || inc >= used || c.takeSmallLocked())
	c.lim.closedUsed -= min(inc, used)
	if !free {
		c.takeControlLocked()
	}
}

// closedLocked keeps the window stream s used and the client has not
// given back, for WINDOW_UPDATEs that arrive after it closed.
func (c *conn) closedLocked(s *stream) {
	if used := s.sendPeak - s.sendWin; used > 0 {
		c.lim.closedUsed += used
	}
}

// dataSentLocked accounts for a DATA frame with payload the server
// queued: it earns the client a paced PING and small WINDOW_UPDATEs.
func (c *conn) dataSentLocked() {
	c.lim.paced.credit()
	c.lim.small = min(c.lim.small+smallUpdatesPerData, smallUpdateBank)
}

// takeSmallLocked spends one small WINDOW_UPDATE earned by DATA sent.
func (c *conn) takeSmallLocked() bool {
	if c.lim.small == 0 {
		return false
	}
	c.lim.small--
	return true
}

// openedLocked records that the client opened stream id.
func (c *conn) openedLocked(id uint32) {
	c.lim.streams++
	c.lim.recent[(id>>1)%recentStreams] = opened{id: id, at: time.Now()}
}

// countResetLocked counts the reset of stream id, by the client or
// decided by the server, when the stream opened within prematureWindow.
// Past the budget, a connection on which at least half of the streams
// were reset prematurely ends (rapid reset, CVE-2023-44487; MadeYouReset,
// CVE-2025-8671).
func (c *conn) countResetLocked(id uint32) {
	o := &c.lim.recent[(id>>1)%recentStreams]
	if o.id != id || id == 0 || time.Since(o.at) >= prematureWindow {
		return
	}
	o.id = 0 // one stream, one reset
	c.lim.resets++
	if c.lim.resets > c.cfg.ResetBudget && c.lim.resets*2 >= c.lim.streams {
		c.abuseLocked("http2-rapid-reset", http2.ErrCodeEnhanceYourCalm)
	}
}

// continuation counts one CONTINUATION frame; h2hdr calls it from the
// read loop, without mu.
func (c *conn) continuation(f *http2.ContinuationFrame) error {
	c.lim.contRun++
	if c.lim.contRun <= maxContinuations && f.Length > 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lim.contRun > maxContinuations {
		c.abuseLocked("http2-continuation-flood", http2.ErrCodeEnhanceYourCalm)
	} else {
		c.takeEmptyLocked()
	}
	if c.abuse != "" {
		return errAbuse
	}
	return nil
}

// abuseLocked ends an abusive connection: GOAWAY with code, and the
// read loop stops at once (it closes the connection after at most
// closeLinger spent writing the GOAWAY). It may run on any goroutine.
func (c *conn) abuseLocked(reason string, code http2.ErrCode) {
	if c.abuse != "" || c.werr != nil {
		return
	}
	c.abuse = reason
	c.count("abuse")
	if !c.goAway || c.goAwayCode != code {
		mark := len(c.out)
		_ = c.wf.WriteGoAway(c.maxID, code, nil)
		c.controlDone(mark)
	}
	c.goAway, c.goAwayCode, c.closing = true, code, true
	// Wake the read loop wherever it waits.
	_ = c.nc.SetReadDeadline(time.Unix(1, 0))
}

// controlDone accounts for one frame of the server's own, queued since
// len(c.out) was mark.
func (c *conn) controlDone(mark int) {
	c.ctlBytes += len(c.out) - mark
	c.ctlFrames++
}

// QueueBound is the most one connection holds queued for writing, in
// bytes, while its handlers' header and trailer blocks stay under
// 16 KiB: the handlers' frames up to 64 KiB plus the last writer's DATA
// frame and header or trailer block that crossed it, and the server's
// own frames up to their bound plus the one that crossed it.
// QueueBoundFrames is the same in frames (each at least 9 bytes).
const (
	QueueBound       = highWater + 2*maxWriteFrame + 2*9 + maxQueuedControlBytes + 32
	QueueBoundFrames = (highWater+2*maxWriteFrame)/9 + 2 + maxQueuedControlFrames + 1
)

// peak records the largest output queue of every connection of the
// process, for tests and for the bound's documentation.
var peak struct{ bytes, frames atomic.Int64 }

// MaxQueued reports the most bytes and frames any connection of this
// process has held queued for writing at once.
func MaxQueued() (bytes, frames int64) { return peak.bytes.Load(), peak.frames.Load() }

// notePeakLocked raises the connection's and the process's peaks.
func (c *conn) notePeakLocked() {
	if len(c.out) > c.peakBytes {
		c.peakBytes = len(c.out)
		raise(&peak.bytes, int64(c.peakBytes))
	}
	if c.outFrames > c.peakFrames {
		c.peakFrames = c.outFrames
		raise(&peak.frames, int64(c.peakFrames))
	}
}

func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// evictLocked keeps the unread request body bytes of all streams within
// BufferLimit: while they are over it, the stream whose handler has gone
// longest without reading (or, never read, whose unread bytes came
// first) loses its unread bytes. A body nobody reads is the first to
// go; one read all along, however slowly, was read more recently. Its
// handler's next Read fails with the reason; a stream the client is still sending on is
// reset (CANCEL). Such a reset counts as premature if the stream is
// younger than prematureWindow: a body that waited longest is seldom
// that young unless a client opens streams to have them dropped (the
// handlers it started having done work upstream).
func (c *conn) evictLocked() {
	for c.buffered > c.cfg.BufferLimit {
		var victim *stream
		for _, s := range c.streams {
			if len(s.buf) == s.off {
				continue
			}
			if victim == nil || s.lastRead < victim.lastRead || s.lastRead == victim.lastRead && s.id < victim.id {
				victim = s
			}
		}
		if victim == nil {
			return
		}
		c.count("buffer_limit")
		err := fmt.Errorf("h2server: request body not read: its %d unread bytes were dropped, the connection holding its limit of %d", len(victim.buf)-victim.off, c.cfg.BufferLimit)
		victim.dropBufLocked()
		victim.dropped = true
		victim.bodyErr = err // also over an io.EOF: the body lost bytes
		victim.cond.Broadcast()
		if !victim.remoteDone {
			mark := len(c.out)
			_ = c.wf.WriteRSTStream(victim.id, http2.ErrCodeCancel)
			c.controlDone(mark)
			c.countResetLocked(victim.id)
			c.lim.evicted[c.lim.evictedAt%len(c.lim.evicted)] = victim.id
			c.lim.evictedAt++
			victim.abortLocked(err)
			c.removeLocked(victim)
		}
	}
}

// evictedLocked reports whether stream id is one of the last streams
// reset for BufferLimit.
func (c *conn) evictedLocked(id uint32) bool {
	for _, e := range c.lim.evicted {
		if e == id {
			return true
		}
	}
	return false
}

// holdAcksLocked decides, in the read loop with nothing more buffered,
// whether the queued output, PING acknowledgements only, waits for a
// batch: when the client has been pinging faster than its DATA earns
// (ackHoldAfter). The held acknowledgements go out with the next flush,
// or ackHoldFor later; PINGs that arrive meanwhile are still paced ones,
// since it is the server that has not answered yet.
func (c *conn) holdAcksLocked() bool {
	if c.ackQueued == 0 || c.outFrames != c.ackQueued || c.flushing || c.lim.paced.level < ackHoldAfter {
		return false
	}
	c.lim.acksHeld = c.ackQueued
	if !c.ackArmed {
		c.ackArmed = true
		if c.ackTimer == nil {
			c.ackTimer = time.AfterFunc(ackHoldFor, c.flushHeldAcks)
		} else {
			c.ackTimer.Reset(ackHoldFor)
		}
	}
	return true
}

// flushHeldAcks writes the acknowledgements holdAcksLocked held back.
func (c *conn) flushHeldAcks() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackArmed = false
	if c.werr == nil {
		_ = c.flushLocked()
	}
}
