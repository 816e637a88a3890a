package h1_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

func TestRemoveHopByHopDropsEveryNominatedHeader(t *testing.T) {
	// T05: several Connection lines, an empty first one, nominations of
	// end-to-end headers; TE is kept only as "trailers".
	h := http.Header{
		"Connection":        {"", "X-Forwarded-For, , keep-alive", "l5d-dst-override"},
		"X-Forwarded-For":   {"10.0.0.1"},
		"L5d-Dst-Override":  {"evil:80"},
		"Keep-Alive":        {"timeout=5"},
		"Upgrade":           {"h2c"},
		"Http2-Settings":    {"AAMAAABkAAQAoAAAAAIAAAAA"},
		"Te":                {"gzip, trailers;q=0.5"},
		"Transfer-Encoding": {"chunked"},
		"Proxy-Connection":  {"keep-alive"},
		"Accept":            {"*/*"},
	}
	h1.RemoveHopByHop(h)
	assert.Equal(t, http.Header{"Accept": {"*/*"}, "Te": {"trailers"}}, h)

	h = http.Header{"Te": {"gzip"}, "Connection": {"close"}}
	h1.RemoveHopByHop(h)
	assert.Empty(t, h)
}

func TestUpgradeNeverOffersH2C(t *testing.T) {
	mk := func(conn, up string) *http.Request {
		return &http.Request{ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Connection": {conn}, "Upgrade": {up}}}
	}
	p, ok := h1.Upgrade(mk("Upgrade", "websocket"))
	assert.True(t, ok)
	assert.Equal(t, "websocket", p)
	_, ok = h1.Upgrade(mk("Upgrade, HTTP2-Settings", "h2c"))
	assert.False(t, ok, "h2c upgrades are never forwarded")
	_, ok = h1.Upgrade(mk("Upgrade", "websocket, H2C"))
	assert.False(t, ok)
	_, ok = h1.Upgrade(mk("keep-alive", "websocket"))
	assert.False(t, ok, "Upgrade only counts when Connection names it")
}

// serve runs a Server on one end of a loopback connection and returns the
// other end.
func serve(t *testing.T, s *h1.Server) (net.Conn, context.CancelFunc) {
	ln := testutil.Listen(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.ServeConn(ctx, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() {
		cancel()
		c.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("ServeConn did not return")
		}
	})
	return c, cancel
}

func TestServerKeepsConnectionsAliveAndAnswersPipelinedRequests(t *testing.T) {
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.RequestURI, b)
	})}
	c, _ := serve(t, s)
	_, err := io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	for _, want := range []string{"POST /a abc", "GET /b "} {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
		assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, "unknown length is chunked on HTTP/1.1")
	}
}

func TestServerAnswersRefusedRequestsAndCloses(t *testing.T) {
	called := false
	s := &h1.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })}
	c, _ := serve(t, s)
	_, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.True(t, resp.Close)
	_, err = io.ReadAll(c)
	assert.NoError(t, err, "the connection ends after the refusal")
	assert.False(t, called, "nothing reached the handler")
}

func TestServerSendsContinueOnlyWhenTheBodyIsRead(t *testing.T) {
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reject" {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})}
	c, _ := serve(t, s)
	io.WriteString(c, "PUT /reject HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 413 Request Entity Too Large\r\n", line, "no 100 Continue for a body nobody reads")

	c2, _ := serve(t, s)
	io.WriteString(c2, "PUT /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	br2 := bufio.NewReader(c2)
	line, err = br2.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 100 Continue\r\n", line)
	io.WriteString(c2, "hello")
}

func TestServerWritesTrailersAndDropsInvalidHeaders(t *testing.T) {
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Good", "1")
		w.Header()["X_Bad"] = []string{"underscore"}
		w.Header()["X-Crlf"] = []string{"a\r\nInjected: yes"}
		w.Header().Set("Connection", "keep-alive, X-Good")
		w.Header().Set("Transfer-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "body")
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	})}
	c, _ := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "body", string(b))
	assert.Equal(t, "1", resp.Header.Get("X-Good"))
	assert.Empty(t, resp.Header.Get("X_Bad"))
	assert.Empty(t, resp.Header.Get("Injected"))
	assert.Empty(t, resp.Header.Get("X-Crlf"))
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, "the handler cannot choose the framing")
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
}

func TestServerClosesIdleConnectionsWhenDraining(t *testing.T) {
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	c, cancel := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	cancel()
	_, err = br.ReadByte()
	assert.Error(t, err, "the idle connection is closed on drain")
}

func TestServerCancelsTheRequestWhenTheClientGoesAway(t *testing.T) {
	canceled := make(chan struct{})
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(5 * time.Second):
		}
	})}
	c, _ := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case <-canceled:
	case <-time.After(3 * time.Second):
		t.Fatal("the request context was not cancelled")
	}
}

func TestHijackHandsOverBufferedBytes(t *testing.T) {
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		h1.WriteResponseHead(rw, http.StatusSwitchingProtocols, http.Header{}, "Connection: Upgrade", "Upgrade: echo")
		rw.Flush()
		buf := make([]byte, 5)
		io.ReadFull(rw, buf)
		rw.Write(buf)
		rw.Flush()
	})}
	c, _ := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nearly")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	buf := make([]byte, 5)
	_, err = io.ReadFull(br, buf)
	require.NoError(t, err)
	assert.Equal(t, "early", string(buf), "bytes sent with the request head reach the new protocol")
}

// roundTrip sends one request head on c and reads its whole answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, head string) {
	t.Helper()
	_, err := io.WriteString(c, head)
	require.NoError(t, err)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
}

// requireClosedByServer reads from c until the server closes it, within
// 5 seconds.
func requireClosedByServer(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	require.Error(t, err)
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the connection, not the test's deadline: %v", err)
}

func TestServerWatchesForTheClientGoingAwayOnALaterRequestOfTheConnection(t *testing.T) {
	// The watch timer of a quick first request is left pending; the
	// second request's watch must still start and see the close.
	started, canceled := make(chan struct{}), make(chan struct{})
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			io.WriteString(w, "ok")
			return
		}
		close(started)
		select {
		case <-r.Context().Done():
			close(canceled)
		case <-time.After(5 * time.Second):
		}
	})}
	c, _ := serve(t, s)
	roundTrip(t, c, bufio.NewReader(c), "GET /quick HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started
	c.Close()
	select {
	case <-canceled:
	case <-time.After(3 * time.Second):
		t.Fatal("the second request's context was not cancelled")
	}
}

func TestServerBoundsAHeadThatStopsHalfwayOnAKeptAliveConnection(t *testing.T) {
	// The head of a second request arrives in part and no more: the
	// header deadline ends the connection although the idle timeout is
	// long.
	s := &h1.Server{HeaderTimeout: 100 * time.Millisecond, IdleTimeout: time.Hour,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	c, _ := serve(t, s)
	br := bufio.NewReader(c)
	roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(c, "GET / HTTP/1.1\r\nHo")
	requireClosedByServer(t, c, br)
}

func TestServerServesAHeadThatArrivesInPieces(t *testing.T) {
	got := make(chan string, 1)
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("X-Part")
		io.WriteString(w, "ok")
	})}
	c, _ := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	io.WriteString(c, "X-Part: two\r\n")
	io.WriteString(c, "\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "two", <-got)
}

func TestServerFinishesTheExchangeInProgressWhenDraining(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := &h1.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})}
	c, cancel := serve(t, s)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	cancel()
	close(release)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "done", string(b))
	_, err = br.ReadByte()
	assert.Error(t, err, "the connection closes after the exchange")
}

func TestServerClosesAKeptAliveConnectionIdlePastItsTimeout(t *testing.T) {
	// The wait for a second request is bounded by the connection's idle
	// timer, not by a read deadline set per request.
	s := &h1.Server{IdleTimeout: 100 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	c, _ := serve(t, s)
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		roundTrip(t, c, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	requireClosedByServer(t, c, br)
}
