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
