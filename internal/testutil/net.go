package testutil

import (
	"context"
	"net"
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

// Eventually polls cond every 10ms until it is true or d passes (DefaultTimeout
// when 0), failing the test with msg on timeout.
func Eventually(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	if d == 0 {
		d = DefaultTimeout
	}
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testutil: timed out after %s waiting for %s", d, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
