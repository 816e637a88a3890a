package testutil

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultTimeout bounds every blocking call in a test unless it says otherwise.
const DefaultTimeout = 10 * time.Second

// Context returns a context cancelled after d (DefaultTimeout when d is 0)
// and when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	if d == 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Listen opens a TCP listener on a free loopback port and closes it when the
// test ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil: listen on loopback: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TCPPair returns the two ends of a new TCP connection on 127.0.0.1:
// the one dialled and the one accepted, both closed when the test ends.
// Dialling and accepting are bounded by DefaultTimeout.
func TCPPair(t testing.TB) (dialled, accepted *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("testutil: listen on loopback: %v", err)
	}
	defer ln.Close()
	d, err := net.DialTimeout("tcp", ln.Addr().String(), DefaultTimeout)
	if err != nil {
		t.Fatalf("testutil: dial %s: %v", ln.Addr(), err)
	}
	dialled = d.(*net.TCPConn)
	t.Cleanup(func() { _ = dialled.Close() })
	if err := ln.SetDeadline(time.Now().Add(DefaultTimeout)); err != nil {
		t.Fatalf("testutil: accept deadline: %v", err)
	}
	accepted, err = ln.AcceptTCP()
	if err != nil {
		t.Fatalf("testutil: accept on %s: %v", ln.Addr(), err)
	}
	t.Cleanup(func() { _ = accepted.Close() })
	return dialled, accepted
}

// FreePort returns a loopback port that was free a moment ago. Prefer Listen
// where the code under test can take a listener; use this only for programs
// that must bind the port themselves.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testutil: find free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// PollInterval is how often Poll and Eventually ask their condition.
const PollInterval = 10 * time.Millisecond

// Poll asks cond every PollInterval until it is true (Poll returns true)
// or ctx ends (false). It is the one polling loop of Weft's tests, for
// conditions nothing announces on a channel or a counter (a file another
// process writes, a metric). Safe to call from any goroutine; Eventually
// is Poll under a deadline that fails the test.
func Poll(ctx context.Context, cond func() bool) bool {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-tick.C:
		}
	}
}

// Eventually polls cond until it is true or d passes (DefaultTimeout when
// 0), failing the test with msg on timeout. Call it from the test's
// goroutine.
func Eventually(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	if d == 0 {
		d = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if !Poll(ctx, cond) {
		t.Fatalf("testutil: timed out after %s waiting for %s", d, msg)
	}
}

// WriteCounter is a connection that counts the Write calls made on it
// (how many writes a protocol makes, not their bytes).
type WriteCounter struct {
	net.Conn
	Writes atomic.Int64
}

func (c *WriteCounter) Write(p []byte) (int, error) {
	c.Writes.Add(1)
	return c.Conn.Write(p)
}
