package h1_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

func TestClientHoldsAtMostMaxConnsPerAddrAndQueuesTheRest(t *testing.T) {
	// An upstream that holds every request until released: a third
	// request finds two busy connections and waits for one, it does not
	// open a third.
	release, held, addr := startHoldingServer(t)
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.MaxConnsPerAddr = 2
	results := make(chan string, 3)
	for i := 0; i < 3; i++ {
		go func() {
			req, _ := http.NewRequest("GET", "http://x/", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := cl.RoundTrip(req.WithContext(ctx), addr)
			if err != nil {
				results <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- string(b)
		}()
	}
	for i := 0; i < 2; i++ {
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("the first two requests never reached the upstream")
		}
	}
	assert.Equal(t, 2, cl.Open(addr))

	// A request whose context ends while it waits gets a DialError (not
	// sent: another endpoint may take it) and leaves no slot behind.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequest("GET", "http://x/", nil)
	errc := make(chan error, 1)
	go func() { _, err := cl.RoundTrip(req.WithContext(ctx), addr); errc <- err }()
	cancel()
	select {
	case err := <-errc:
		var de *h1.DialError
		require.ErrorAs(t, err, &de)
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting request ignored its context")
	}

	close(release)
	for i := 0; i < 3; i++ {
		select {
		case got := <-results:
			assert.Equal(t, "ok", got)
		case <-time.After(10 * time.Second):
			t.Fatal("a queued request never got a connection")
		}
	}
	assert.Equal(t, int32(2), dials.Load(), "the third request waited for a connection instead of opening one")
	assert.LessOrEqual(t, cl.Open(addr), 2)
}

func TestClientFreesTheSlotOfEveryClosedConnection(t *testing.T) {
	// Connections closed by the upstream, by a failed dial and by Sweep
	// all give their slot back: with one slot, each request still runs.
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", true
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.MaxConnsPerAddr = 1
	for i := 0; i < 5; i++ {
		_, got := do(t, cl, addr, "GET", "/", nil, 0)
		assert.Equal(t, "ok", got)
	}
	assert.Equal(t, int32(5), dials.Load())
	assert.Equal(t, 0, cl.Open(addr))

	failing := &h1.Client{MaxConnsPerAddr: 1, Dial: func(context.Context, string) (net.Conn, error) {
		return nil, errors.New("refused")
	}}
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", "http://x/", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := failing.RoundTrip(req.WithContext(ctx), "a:1")
		cancel()
		var de *h1.DialError
		require.ErrorAs(t, err, &de, "attempt %d: a dial failure, not a wait for a slot", i)
	}
}

func TestClientAsksReusableBeforeReusingAnIdleConnection(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	var asked atomic.Int32
	cl.Reusable = func(c net.Conn, idle time.Duration) bool {
		asked.Add(1)
		_, isTCP := c.(*net.TCPConn)
		return isTCP && asked.Load() > 1 // refuses the first idle connection
	}
	for i := 0; i < 3; i++ {
		_, got := do(t, cl, addr, "POST", "/", strings.NewReader("x"), 1)
		assert.Equal(t, "ok", got)
	}
	assert.Equal(t, int32(2), asked.Load(), "asked with the dialled connection, once per reuse")
	assert.Equal(t, int32(2), dials.Load(), "the refused connection was replaced, the accepted one reused")
}

func TestClientResendsOnlySafeRequestsWhenAKeptConnectionDiesBeforeTheAnswer(t *testing.T) {
	// The upstream answers the first request on each connection and
	// closes the connection on reading the second, without answering: a
	// kept-alive connection that died under the request.
	var seen atomic.Int32
	addr := rawUpstream(t, func(r *http.Request, _ []byte) (string, bool) {
		seen.Add(1)
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	ln := testutil.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				// Relay the first exchange, then drop the connection at
				// the second request's first bytes.
				buf := make([]byte, 4096)
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				up.Write(buf[:n])
				m, _ := up.Read(buf)
				c.Write(buf[:m])
				c.Read(buf)
			}()
		}
	}()
	proxy := ln.Addr().String()
	var dials atomic.Int32
	cl := newClient(&dials)

	do(t, cl, proxy, "GET", "/", nil, 0)
	_, got := do(t, cl, proxy, "GET", "/", nil, 0)
	assert.Equal(t, "ok", got, "GET without a body is sent again on a new connection")
	assert.Equal(t, int32(2), seen.Load())

	req, _ := http.NewRequest("POST", "http://x/", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cl.RoundTrip(req.WithContext(ctx), proxy)
	require.Error(t, err, "POST is not idempotent: not sent twice")
	assert.Equal(t, int32(2), seen.Load(), "the upstream saw no POST")
}

func TestClientKeepsTheRestOfThePoolFromAClientHoldingItsShare(t *testing.T) {
	// Four connections per address, two per client, an upstream that
	// holds every request: client a's third request waits for one of its
	// own and gives up after WaitTimeout, client b still gets its two,
	// and then the pool is full for client c.
	release, held, addr := startHoldingServer(t)
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.MaxConnsPerAddr, cl.MaxConnsPerClient = 4, 2
	cl.WaitTimeout = 50 * time.Millisecond // the mechanism under test
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	results := make(chan string, 4)
	send := func(from netip.Addr) {
		req, _ := http.NewRequest("GET", "http://x/", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.RoundTripFrom(req.WithContext(ctx), addr, from)
		if err != nil {
			results <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		results <- string(body)
	}
	waitHeld := func(n int) {
		for i := 0; i < n; i++ {
			select {
			case <-held:
			case <-time.After(10 * time.Second):
				t.Fatal("a request never reached the upstream")
			}
		}
	}
	tryFrom := func(from netip.Addr) error {
		req, _ := http.NewRequest("GET", "http://x/", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := cl.RoundTripFrom(req.WithContext(ctx), addr, from)
		return err
	}

	go send(a)
	go send(a)
	waitHeld(2)
	var pe *h1.PoolTimeoutError
	require.ErrorAs(t, tryFrom(a), &pe, "client a holds its share")
	assert.True(t, pe.Share)
	assert.Equal(t, 2, pe.Limit)

	go send(b)
	go send(b)
	waitHeld(2)
	assert.Equal(t, 4, cl.Open(addr))
	require.ErrorAs(t, tryFrom(c), &pe, "the pool is full")
	assert.False(t, pe.Share)
	assert.Equal(t, 4, pe.Limit)
	assert.Equal(t, 0, cl.Waiting())

	close(release)
	for i := 0; i < 4; i++ {
		select {
		case got := <-results:
			assert.Equal(t, "ok", got)
		case <-time.After(10 * time.Second):
			t.Fatal("a held request never ended")
		}
	}
	_, got := do(t, cl, addr, "GET", "/", nil, 0) // the zero Addr is a client too
	assert.Equal(t, "ok", got)
	assert.Equal(t, int32(4), dials.Load(), "the last request reused a connection")
}

func TestClientForgetsARequestWhoseContextEndsWhileItWaits(t *testing.T) {
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	addr := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-release
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.MaxConnsPerAddr, cl.MaxConnsPerClient = 2, 1
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://x/", nil)
		resp, err := cl.RoundTrip(req, addr)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://x/", nil)
		_, err := cl.RoundTrip(req.WithContext(ctx), addr)
		errc <- err
	}()
	testutil.Eventually(t, 10*time.Second, func() bool { return cl.Waiting() == 1 }, "the second request waits for its client's one connection")
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting request ignored its context")
	}
	assert.Equal(t, 0, cl.Waiting())
	close(release)
	require.NoError(t, <-done)
	assert.Equal(t, int32(1), dials.Load(), "the cancelled request opened nothing")
}

// startHoldingServer starts an upstream that holds every request until
// release is closed, announcing each on held (room for 8), then answers
// "ok".
func startHoldingServer(t *testing.T) (release chan struct{}, held chan struct{}, addr string) {
	release = make(chan struct{})
	held = make(chan struct{}, 8)
	addr = startServer(t, func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	})
	return release, held, addr
}
