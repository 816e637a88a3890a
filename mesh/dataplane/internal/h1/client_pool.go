package h1

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// How a request gets a connection: an idle one, or a slot for a new one
// while fewer than MaxConnsPerAddr are open; otherwise it waits. With
// MaxConnsPerClient, a client that already holds that many connections
// to the address waits too, for one of its own to come back, even when
// the pool has room: the rest is kept for the others. A wait ends when
// a connection to the address comes back or closes (and the request
// looks again), when the request's context ends, or after WaitTimeout.

// heldKey names the connections one client holds to one address.
type heldKey struct {
	addr   string
	client netip.Addr
}

// PoolTimeoutError is returned by RoundTrip when no connection to the
// address was free within the client's WaitTimeout: the request was not
// sent.
type PoolTimeoutError struct {
	Addr  string
	Wait  time.Duration
	Limit int  // the bound the request met: per address, or per client
	Share bool // the client's own share was the bound (MaxConnsPerClient)
}

// Error describes the wait.
func (e *PoolTimeoutError) Error() string {
	if e.Share {
		return fmt.Sprintf("h1: this client holds its %d connections to %s and none came back within %s", e.Limit, e.Addr, e.Wait)
	}
	return fmt.Sprintf("h1: none of the %d connections to %s came back within %s", e.Limit, e.Addr, e.Wait)
}

// slotConn releases its address's slot once, on its first Close.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection slotConn wraps.
func (c *slotConn) NetConn() net.Conn { return c.Conn }

// signal wakes the requests waiting for a connection to addr. cl.mu is
// held.
func (cl *Client) signal(addr string) {
	if ch := cl.wake[addr]; ch != nil {
		close(ch)
		delete(cl.wake, addr)
	}
}

// hold counts a connection to addr for client. cl.mu is held.
func (cl *Client) hold(addr string, client netip.Addr) {
	if cl.MaxConnsPerClient <= 0 {
		return
	}
	if cl.held == nil {
		cl.held = map[heldKey]int{}
	}
	cl.held[heldKey{addr, client}]++
}

// unhold forgets a connection to addr of client. cl.mu is held.
func (cl *Client) unhold(addr string, client netip.Addr) {
	if cl.MaxConnsPerClient <= 0 {
		return
	}
	k := heldKey{addr, client}
	if cl.held[k]--; cl.held[k] <= 0 {
		delete(cl.held, k)
	}
}

// drop ends cc's hold by its client's request, if it has one. cl.mu is
// held.
func (cl *Client) drop(cc *clientConn) {
	if cc.holds {
		cc.holds = false
		cl.unhold(cc.addr, cc.client)
	}
}

// release forgets a connection that closed: its slot, and its client's
// hold when it closed busy.
func (cl *Client) release(cc *clientConn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.drop(cc)
	if cl.open[cc.addr]--; cl.open[cc.addr] <= 0 {
		delete(cl.open, cc.addr)
	}
	cl.signal(cc.addr)
}

// unreserve gives back a slot acquire reserved for a connection that
// could not be dialled.
func (cl *Client) unreserve(addr string, client netip.Addr) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.unhold(addr, client)
	if cl.open[addr]--; cl.open[addr] <= 0 {
		delete(cl.open, addr)
	}
	cl.signal(addr)
}

// acquire returns an idle connection to addr, or reserves a slot for a
// new one (cc nil), in both cases counted for client; it waits while
// client holds its share or MaxConnsPerAddr connections are open and
// none is idle.
func (cl *Client) acquire(ctx context.Context, addr string, client netip.Addr) (*clientConn, error) {
	var (
		timer   *time.Timer
		expired <-chan time.Time
		waited  bool
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		if waited {
			cl.mu.Lock()
			cl.waiting--
			cl.mu.Unlock()
		}
	}()
	for {
		cl.mu.Lock()
		if cl.closed {
			cl.mu.Unlock()
			return nil, ErrClientClosed
		}
		share := cl.MaxConnsPerClient > 0 && cl.held[heldKey{addr, client}] >= cl.MaxConnsPerClient
		if !share {
			cc, stale := cl.takeIdle(addr)
			if cc != nil {
				cc.client, cc.holds = client, cl.MaxConnsPerClient > 0
				cl.hold(addr, client)
				cl.mu.Unlock()
				closeAll(stale)
				if cl.Reusable != nil && !cl.Reusable(cc.raw, time.Since(cc.since)) {
					cc.c.Close() // releases the hold
					continue
				}
				return cc, nil
			}
			if len(stale) > 0 {
				cl.mu.Unlock()
				closeAll(stale)
				continue
			}
			if cl.MaxConnsPerAddr <= 0 || cl.open[addr] < cl.MaxConnsPerAddr {
				if cl.open == nil {
					cl.open = map[string]int{}
				}
				cl.open[addr]++
				cl.hold(addr, client)
				cl.mu.Unlock()
				return nil, nil
			}
		}
		if cl.wake == nil {
			cl.wake = map[string]chan struct{}{}
		}
		ch := cl.wake[addr]
		if ch == nil {
			ch = make(chan struct{})
			cl.wake[addr] = ch
		}
		if !waited {
			waited = true
			cl.waiting++
		}
		cl.mu.Unlock()
		if timer == nil && cl.WaitTimeout > 0 {
			timer = time.NewTimer(cl.WaitTimeout)
			expired = timer.C
		}
		select {
		case <-ch:
		case <-expired:
			limit := cl.MaxConnsPerAddr
			if share {
				limit = cl.MaxConnsPerClient
			}
			return nil, &PoolTimeoutError{Addr: addr, Wait: cl.WaitTimeout, Limit: limit, Share: share}
		case <-ctx.Done():
			return nil, &DialError{fmt.Errorf("h1: waiting for one of the %d connections to %s: %w", cl.MaxConnsPerAddr, addr, ctx.Err())}
		}
	}
}

// Open reports the connections open to addr, idle and busy.
func (cl *Client) Open(addr string) int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.open[addr]
}

// Waiting reports the requests waiting for a connection, to any address.
func (cl *Client) Waiting() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.waiting
}
