package h2server

import (
	"net"
	"time"
)

// The write path. Frames are encoded under the connection's mu into
// c.out; flushLocked writes them. While one goroutine writes to the
// socket (mu released), others keep appending, and the writer loops until
// nothing is left: every flush carries what was queued during the
// previous one (group commit). A goroutine that asks for a flush while
// another is writing returns at once: its frames go out with the next
// round of the writing goroutine, which never waits for more data.

// outWriter lets the write Framer append to c.out (mu held).
type outWriter struct{ c *conn }

func (w outWriter) Write(p []byte) (int, error) {
	c := w.c
	c.out = append(c.out, p...)
	c.outFrames++ // the Framer writes each frame with one Write
	if len(c.out) > c.peakBytes || c.outFrames > c.peakFrames {
		c.notePeakLocked()
	}
	return len(p), nil
}

// outBuffer collects one encoded header block.
type outBuffer struct{ b []byte }

func (b *outBuffer) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

// flushLocked writes what is queued, or leaves it to the goroutine
// already writing. mu is held on entry and exit, released while writing.
func (c *conn) flushLocked() error {
	for {
		if c.werr != nil {
			c.out = c.out[:0]
			return c.werr
		}
		if len(c.out) == 0 || c.flushing {
			return nil
		}
		c.flushing = true
		b := c.out
		acks := c.ackQueued
		c.out = c.spare[:0]
		c.spare = nil
		c.outFrames, c.ctlBytes, c.ctlFrames, c.ackQueued, c.lim.acksHeld = 0, 0, 0, 0, 0
		timeout := c.cfg.WriteTimeout
		if c.closing {
			timeout = min(timeout, closeLinger)
		}
		c.mu.Unlock()
		// A client that does not read cannot hold a writer (and the
		// goroutines waiting behind it) longer than the write timeout.
		_ = c.nc.SetWriteDeadline(time.Now().Add(timeout))
		_, err := c.nc.Write(b)
		c.mu.Lock()
		c.flushing = false
		if cap(b) <= 4*highWater {
			c.spare = b[:0]
		}
		if err == nil {
			c.lim.pingsOut = max(c.lim.pingsOut-acks, 0)
		}
		if err != nil && c.werr == nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.count("write_timeout")
			}
			c.werr = err
			_ = c.nc.Close() // the read loop ends and fails every stream
			for _, s := range c.streams {
				s.cond.Broadcast()
			}
		}
		c.flushDone.Broadcast()
	}
}

// backpressureLocked bounds the queued output: past highWater, the
// caller writes it or waits for the goroutine writing.
func (c *conn) backpressureLocked() error {
	for len(c.out) >= highWater {
		if c.werr != nil {
			return c.werr
		}
		if !c.flushing {
			return c.flushLocked()
		}
		c.flushDone.Wait()
	}
	return c.werr
}
