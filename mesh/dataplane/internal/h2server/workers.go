package h2server

import (
	"sync"
	"time"
)

// handlerIdle is how long a goroutine whose handler returned waits for
// the connection's next stream before it exits.
const handlerIdle = time.Second

// handlerPool runs streams' handlers on goroutines that may serve more
// than one stream of the connection, one after another. A new goroutine
// starts with a small stack and, as the proxy's handler calls in, grows
// it by copying it to one twice the size, several times per request
// (7-9% of the proxy pair's CPU per gRPC call in the profile); a
// goroutine that goes on to the next stream keeps the stack it grew.
//
// Every stream still gets a goroutine of its own while its handler runs:
// a new stream goes to a goroutine that is waiting, or to a new one, so
// no handler waits for another (no head-of-line blocking), and the read
// loop never runs a handler. At most as many goroutines wait as handlers
// ran at once on the connection, each for at most handlerIdle, and all
// exit when the connection ends.
type handlerPool struct {
	work chan *stream // unbuffered: a send succeeds only to a waiting goroutine
	quit chan struct{}
	wg   sync.WaitGroup
}

func (p *handlerPool) init() {
	p.work = make(chan *stream)
	p.quit = make(chan struct{})
}

// stop makes the waiting goroutines exit, and waits for them.
func (p *handlerPool) stop() {
	close(p.quit)
	p.wg.Wait()
}

// startHandler runs s's handler on a waiting goroutine, or on a new one.
func (c *conn) startHandler(s *stream) {
	select {
	case c.pool.work <- s:
		return
	default:
	}
	c.pool.wg.Add(1)
	go c.handlerLoop(s)
}

// handlerLoop runs s's handler, then the handlers of the streams handed
// to it while it waits, until it has waited handlerIdle for nothing or
// the connection ends.
func (c *conn) handlerLoop(s *stream) {
	defer c.pool.wg.Done()
	var idle *time.Timer
	for {
		c.runHandler(s)
		s = nil // keep no reference to a finished stream while waiting
		if idle == nil {
			idle = time.NewTimer(handlerIdle)
		} else {
			idle.Reset(handlerIdle)
		}
		select {
		case s = <-c.pool.work:
		case <-idle.C:
			return
		case <-c.pool.quit:
			idle.Stop()
			return
		}
	}
}

// dispatchBatch is how many new streams wait for their handlers while the
// read loop goes on with frames already received.
const dispatchBatch = 32

// A new stream's handler does not start when its HEADERS is read but
// once the read loop has taken every frame already received (the frames
// of one read, at most a 4 KiB buffer), or when dispatchBatch streams
// wait. A stream that one of those frames ended first (the client's
// RST_STREAM, or a frame the server answers with RST_STREAM, such as a
// WINDOW_UPDATE of 0) is dropped without its handler ever running: the
// request never reaches the application. That is what a client opening
// and resetting streams in one write (Rapid Reset, MadeYouReset) gets:
// its streams count against the reset budget and cost the proxy the
// parsing, not a request upstream. A client sending one frame at a
// time waits for nothing, since nothing else is buffered.

// deferHandlerLocked queues s's handler until dispatchLocked. cl.mu is
// held.
func (c *conn) deferHandlerLocked(s *stream) {
	if len(c.pending) >= dispatchBatch {
		c.dispatchLocked()
	}
	c.pending = append(c.pending, s)
}

// dispatchLocked starts the handlers of the streams waiting for them,
// and drops those reset meanwhile. c.mu is held.
func (c *conn) dispatchLocked() {
	for i, s := range c.pending {
		c.pending[i] = nil
		if c.streams[s.id] != s || s.err != nil {
			c.dropHandlerLocked(s)
			continue
		}
		c.startHandler(s)
	}
	c.pending = c.pending[:0]
}

// dropPendingLocked forgets the streams still waiting for their
// handlers when the connection ends. c.mu is held.
func (c *conn) dropPendingLocked() {
	for i, s := range c.pending {
		c.pending[i] = nil
		c.dropHandlerLocked(s)
	}
	c.pending = c.pending[:0]
}

// dropHandlerLocked accounts for a stream whose handler will never run,
// as runHandler would have once it returned. c.mu is held.
func (c *conn) dropHandlerLocked(s *stream) {
	c.running--
	c.notRun++
	s.cancel()
	c.removeLocked(s)
	s.dropBufLocked()
	c.handlers.Done()
	c.maybeCloseLocked()
}
