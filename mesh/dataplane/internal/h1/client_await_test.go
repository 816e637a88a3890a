package h1_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

// watchedSock is a TCP connection whose RawConn reports its waits, and
// whose writes say whether they happened inside one.
type watchedSock struct {
	*net.TCPConn
	waits        atomic.Int32
	inside       atomic.Bool
	writesInside atomic.Int32
	writesOut    atomic.Int32
}

func (w *watchedSock) Write(p []byte) (int, error) {
	if w.inside.Load() {
		w.writesInside.Add(1)
	} else {
		w.writesOut.Add(1)
	}
	return w.TCPConn.Write(p)
}

func (w *watchedSock) SyscallConn() (syscall.RawConn, error) {
	rc, err := w.TCPConn.SyscallConn()
	if err != nil {
		return nil, err
	}
	return watchedRaw{RawConn: rc, w: w}, nil
}

type watchedRaw struct {
	syscall.RawConn
	w *watchedSock
}

func (r watchedRaw) Read(f func(uintptr) bool) error {
	r.w.waits.Add(1)
	return r.RawConn.Read(func(fd uintptr) bool {
		r.w.inside.Store(true)
		defer r.w.inside.Store(false)
		return f(fd)
	})
}

// layer stands for the proxy's wrappers (TLS, byte counters): it says
// what it wraps and nothing else.
type layer struct{ net.Conn }

func (l layer) NetConn() net.Conn { return l.Conn }

func TestClientSendsTheRequestFromInsideTheWaitForItsAnswer(t *testing.T) {
	// The request is written from the socket's RawConn.Read callback, so
	// that the answer is awaited without a read that finds nothing first.
	// The client finds the socket through the layers above it.
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	var sock *watchedSock
	cl := &h1.Client{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		sock = &watchedSock{TCPConn: c.(*net.TCPConn)}
		return layer{layer{sock}}, nil
	}}
	const n = 5
	for i := 0; i < n; i++ {
		_, got := do(t, cl, addr, "GET", "/", nil, 0)
		assert.Equal(t, "ok", got)
	}
	for i := 0; i < n; i++ {
		_, got := do(t, cl, addr, "PUT", "/", strings.NewReader("body"), 4)
		assert.Equal(t, "ok", got)
	}
	require.NotNil(t, sock)
	assert.Equal(t, int32(2*n), sock.waits.Load(), "one wait per exchange, on one kept-alive connection")
	assert.Equal(t, int32(2*n), sock.writesInside.Load(), "each request went out from inside its wait")
	assert.Zero(t, sock.writesOut.Load())
}

func TestClientReadsAsUsualWhenNoSocketIsReachable(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	cl := &h1.Client{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		return struct{ net.Conn }{c}, err // hides both SyscallConn and what it wraps
	}}
	for i := 0; i < 3; i++ {
		_, got := do(t, cl, addr, "GET", "/", nil, 0)
		assert.Equal(t, "ok", got)
	}
	assert.Nil(t, h1.SocketOf(struct{ net.Conn }{}))
}

func TestClientWaitingForAnAnswerStillSeesBytesSentOutOfTurn(t *testing.T) {
	// After its first answer the upstream writes bytes nobody asked for on
	// the idle connection, then answers the next request properly. The
	// bytes were there before the request went out; the exchange must end
	// with an error (the bytes are not an answer), not wait forever.
	junk := make(chan struct{})
	sent := make(chan struct{})
	ln := testutil.Listen(t)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, r.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			if i == 0 {
				<-junk
				io.WriteString(c, "out of turn\r\n\r\n")
				close(sent)
			}
		}
	}()
	addr := ln.Addr().String()
	var dials atomic.Int32
	cl := newClient(&dials)
	_, got := do(t, cl, addr, "GET", "/", nil, 0)
	require.Equal(t, "ok", got)
	close(junk)
	<-sent

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://x/", nil)
	_, err := cl.RoundTrip(req, addr)
	require.Error(t, err, "the bytes out of turn are not an answer")
	assert.NoError(t, ctx.Err(), "the exchange ended on the bytes, not at the deadline")
	assert.Equal(t, int32(1), dials.Load())
}

func TestClientResendsAGetOnAConnectionTheServerClosedWhileIdle(t *testing.T) {
	// The upstream answers one request per connection and then closes it
	// without saying so (no "Connection: close"). The next GET meets the
	// closed connection, whether its close arrived before or after the
	// request went out, and is sent again on a new one.
	var conns sync.WaitGroup
	ln := testutil.Listen(t)
	closed := make(chan struct{}, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				br := bufio.NewReader(c)
				if r, err := http.ReadRequest(br); err == nil {
					io.Copy(io.Discard, r.Body)
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
				c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	addr := ln.Addr().String()
	var dials atomic.Int32
	cl := newClient(&dials)
	for i := 0; i < 3; i++ {
		_, got := do(t, cl, addr, "GET", "/", nil, 0)
		assert.Equal(t, "ok", got)
		<-closed // the upstream closed this connection before the next request
	}
	assert.Equal(t, int32(3), dials.Load(), "every request after the first found its connection closed and dialled again")
}
