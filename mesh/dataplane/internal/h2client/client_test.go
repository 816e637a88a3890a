package h2client_test

//lint:file-ignore SA1019 x/net's HTTP/2 Server is the independent server the client is tested against (decisions: the HTTP/2 client's tests run it against x/net's server).

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

func TestGetOverTLSCarriesTheRequestAndReturnsTheResponse(t *testing.T) {
	seen := make(chan *http.Request, 1)
	srv := startH2(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("X-Answer", "42")
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
	}))
	cc := srv.dial(t)
	req := request(t, "GET", srv.addr, "/a%2Fb/c?q=1", nil)
	req.Host = "svc.example:8080"
	req.Header.Set("User-Agent", "")
	req.Header.Set("Te", "trailers")
	req.Header.Set("Connection", "keep-alive")
	req.Header["X-Multi"] = []string{"a", "b"}
	req.Header.Set("Cookie", "a=1; b=2;c=3")
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, int64(5), resp.ContentLength)
	assert.Equal(t, "42", resp.Header.Get("X-Answer"))
	require.NotNil(t, resp.TLS)

	r := recv(t, seen)
	assert.Equal(t, "GET", r.Method)
	assert.Equal(t, "/a%2Fb/c?q=1", r.RequestURI)
	assert.Equal(t, "svc.example:8080", r.Host)
	assert.Equal(t, []string{"trailers"}, r.Header["Te"])
	assert.Equal(t, []string{"a", "b"}, r.Header["X-Multi"])
	assert.Equal(t, "a=1; b=2; c=3", r.Header.Get("Cookie"), "split in pairs on the wire, joined by the server")
	assert.NotContains(t, r.Header, "User-Agent")
	assert.NotContains(t, r.Header, "Connection")
	noClientGoroutinesAfter(t, cc)
}

func noClientGoroutinesAfter(t *testing.T, cc *h2client.Conn) {
	t.Helper()
	require.NoError(t, cc.Close())
	assert.True(t, cc.State().Closed)
	noClientGoroutines(t)
}

func TestRequestsWithConnectionSpecificHeadersAreRefusedBeforeSending(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the request must not reach the server")
	}))
	cc := srv.dial(t)
	for name, v := range map[string]string{"Upgrade": "websocket", "Transfer-Encoding": "gzip", "Connection": "upgrade"} {
		req := request(t, "GET", srv.addr, "/", nil)
		req.Header.Set(name, v)
		_, err := cc.RoundTrip(req)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), name)
	}
	req := request(t, "GET", srv.addr, "/", nil)
	req.Header["Bad\nName"] = []string{"x"}
	_, err := cc.RoundTrip(req)
	require.ErrorContains(t, err, "invalid request header name")
	assert.Equal(t, 0, cc.State().Streams)
}

// echo answers with the request body, headers flushed first, and the
// request's trailers as response trailers.
func echo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "X-Sum")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	h := sha256.New()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			h.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		if err != nil {
			break
		}
	}
	w.Header().Set("X-Sum", string(rune('a'+h.Sum(nil)[0]%26)))
	for k, vv := range r.Trailer {
		w.Header()[http.TrailerPrefix+k] = vv
	}
}

func TestLargeBodiesBeyondTheWindowsFlowBothWays(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		srv := startH2(t, tlsOn, &http2.Server{MaxUploadBufferPerStream: 65535, MaxUploadBufferPerConnection: 65535}, http.HandlerFunc(echo))
		cc := srv.dial(t, h2client.WithWindows(65535, 65535))
		payload := make([]byte, 3<<20+17)
		_, _ = rand.Read(payload)
		// A plain reader: no ReadReady, so it is streamed.
		req := request(t, "POST", srv.addr, "/echo", io.NopCloser(bytes.NewReader(payload)))
		req.ContentLength = -1
		resp, err := cc.RoundTrip(req)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, sha256.Sum256(payload), sha256.Sum256(got))
		assert.NotEmpty(t, resp.Trailer.Get("X-Sum"))
		noClientGoroutinesAfter(t, cc)
	}
}

func TestResponseTrailersAppearAtEOFAndRequestTrailersAreSent(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(echo))
	cc := srv.dial(t)
	body := newSlowBody()
	req := request(t, "POST", srv.addr, "/echo", body)
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Req-Trailer": nil}
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err, "the headers come before any body byte is sent")
	assert.Equal(t, http.Header{"X-Sum": nil}, resp.Trailer, "declared trailers are known before the body")
	body.next <- []byte("ping")
	buf := make([]byte, 4)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))
	req.Trailer.Set("X-Req-Trailer", "sent")
	close(body.next)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Empty(t, rest)
	assert.Equal(t, "sent", resp.Trailer.Get("X-Req-Trailer"))
	assert.NotEmpty(t, resp.Trailer.Get("X-Sum"))
	resp.Body.Close()
	noClientGoroutinesAfter(t, cc)
}

func TestARequestWithAReadyBodyGoesOutInOneWrite(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(echo))
	raw, err := net.Dial("tcp", srv.addr)
	require.NoError(t, err)
	conn := &testutil.WriteCounter{Conn: raw}
	cc, err := h2client.New(testutil.Context(t, 0), conn)
	require.NoError(t, err)
	defer cc.Close()
	call := func() {
		req := request(t, "POST", srv.addr, "/echo", readyBody{bytes.NewReader([]byte("\x00\x00\x00\x00\x03abc"))})
		resp, err := cc.RoundTrip(req)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, "\x00\x00\x00\x00\x03abc", string(got))
		resp.Body.Close()
	}
	call() // the SETTINGS exchange is over once a response came
	before := conn.Writes.Load()
	call()
	assert.Equal(t, int64(1), conn.Writes.Load()-before, "HEADERS, DATA and END_STREAM in one write")
	before = conn.Writes.Load()
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/echo", nil))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, int64(1), conn.Writes.Load()-before, "a bodyless request is one HEADERS frame")
}

func TestResponseBodyReturnsEOFWithTheLastBytesAndSaysWhenReady(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "all of it")
	}))
	cc := srv.dial(t)
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	rr, ok := resp.Body.(interface{ ReadReady() bool })
	require.True(t, ok, "the body implements ReadReady")
	require.True(t, testutil.Poll(testutil.Context(t, 0), rr.ReadReady))
	// The server ends the stream with the data or right after it: once
	// the end is in, a read returns the bytes with io.EOF.
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool {
		return cc.State().Streams == 0
	}))
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	assert.Equal(t, "all of it", string(buf[:n]))
	assert.Equal(t, io.EOF, err)
}

func TestCancellingTheContextMidStreamResetsTheStreamAndClosesTheBody(t *testing.T) {
	serverGone := make(chan struct{})
	srv := startH2(t, true, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(serverGone)
	}))
	cc := srv.dial(t)
	body := newSlowBody()
	req := request(t, "POST", srv.addr, "/", body)
	ctx, cancel := contextWithCancel(req)
	req = req.WithContext(ctx)
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	cancel()
	_, err = resp.Body.Read(buf)
	require.ErrorContains(t, err, "cancel")
	waitChan(t, serverGone, "the server sees the stream reset")
	waitChan(t, body.closed, "the request body is closed")
	assert.Equal(t, 0, cc.State().Streams)
	noClientGoroutinesAfter(t, cc)
}

func TestCancellingBeforeTheResponseHeadersEndsRoundTrip(t *testing.T) {
	entered := make(chan struct{})
	serverGone := make(chan struct{})
	srv := startH2(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-r.Context().Done()
		close(serverGone)
	}))
	cc := srv.dial(t)
	req := request(t, "GET", srv.addr, "/", nil)
	ctx, cancel := contextWithCancel(req)
	go func() {
		select { // cancels in any case; the test's own waits are bounded
		case <-entered:
		case <-time.After(testutil.DefaultTimeout):
		}
		cancel()
	}()
	_, err := cc.RoundTrip(req.WithContext(ctx))
	require.ErrorContains(t, err, "request cancelled")
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, h2client.ErrUnprocessed, "the server had the request")
	waitChan(t, serverGone, "the server sees the stream reset")
	noClientGoroutinesAfter(t, cc)
}

func TestAReservationOnAClosingConnectionIsNotSent(t *testing.T) {
	var headers atomic.Int32
	srv := startRaw(t, nil, func(rc *rawConn) {
		// Counts requests, answers none, sends no GOAWAY of its own.
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.MetaHeadersFrame); ok {
				headers.Add(1)
			}
		}
	})
	cc := dialAddr(t, srv.addr, nil)
	first := make(chan error, 1)
	go func() {
		_, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
		first <- err
	}()
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return headers.Load() == 1 }))
	require.True(t, cc.ReserveNewRequest())
	shut := make(chan error, 1)
	go func() { shut <- cc.Shutdown(testutil.Context(t, 0)) }()
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closing }))
	_, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	require.NoError(t, cc.Close())
	require.Error(t, recv(t, first))
	recv(t, shut)
	assert.Equal(t, int32(1), headers.Load(), "the reserved request was never sent")
}

func TestStreamLimitMakesRoundTripWaitAndReservationsRespectIt(t *testing.T) {
	var inside, most atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	srv := startH2(t, false, &http2.Server{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inside.Add(1)
		defer inside.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		entered <- struct{}{}
		<-release
	}))
	cc := srv.dial(t)
	// A first exchange brings the server's SETTINGS in.
	close(release)
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	recv(t, entered)
	release = make(chan struct{})

	require.True(t, cc.ReserveNewRequest())
	assert.False(t, cc.ReserveNewRequest(), "one stream at most")
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	recv(t, entered)
	// A request that gives up while waiting for a slot.
	req := request(t, "GET", srv.addr, "/", nil)
	ctx, cancel := contextWithCancel(req)
	cancel()
	_, err = cc.RoundTrip(req.WithContext(ctx))
	require.ErrorContains(t, err, "waiting for a stream")
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), most.Load())
}

func TestInformationalResponsesReachTheTraceHooks(t *testing.T) {
	srv := startRaw(t, nil, func(rc *rawConn) {
		h, ok := readUntil[*http2.MetaHeadersFrame](rc)
		if !ok {
			return
		}
		rc.headers(h.StreamID, false, ":status", "103", "link", "</a.css>")
		rc.headers(h.StreamID, false, ":status", "100")
		rc.headers(h.StreamID, true, ":status", "204")
		rc.waitClosed()
	})
	cc := dialAddr(t, srv.addr, nil)
	var got []int
	var links []string
	var cont bool
	trace := &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			got = append(got, code)
			links = append(links, h.Get("Link"))
			return nil
		},
		Got100Continue: func() { cont = true },
	}
	req := request(t, "GET", srv.addr, "/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := cc.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, 204, resp.StatusCode)
	assert.Equal(t, http.NoBody, resp.Body)
	assert.Equal(t, []int{103, 100}, got)
	assert.Equal(t, "</a.css>", links[0])
	assert.True(t, cont)
}

func TestGracefulShutdownLetsStreamsFinish(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	srv := startH2(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	}))
	cc := srv.dial(t)
	result := make(chan string, 1)
	go func() {
		resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
		if err != nil {
			result <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result <- string(b)
	}()
	waitChan(t, entered, "the request reaches the server")
	shut := make(chan error, 1)
	go func() { shut <- cc.Shutdown(testutil.Context(t, 0)) }()
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closing }))
	_, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	close(release)
	assert.Equal(t, "done", recv(t, result))
	require.NoError(t, recv(t, shut))
	assert.True(t, cc.State().Closed)
	noClientGoroutines(t)
}

func TestAnIdleConnectionIsClosed(t *testing.T) {
	srv := startH2(t, false, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	cc := srv.dial(t, h2client.WithIdleTimeout(20e6))
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	resp.Body.Close()
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closed }))
	_, err = cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
}

func TestAServerThatStopsAnsweringPingsIsDropped(t *testing.T) {
	srv := startRaw(t, nil, func(rc *rawConn) {
		// Reads everything, answers nothing.
		rc.waitClosed()
	})
	var classes sync.Map
	cc := dialAddr(t, srv.addr, nil, h2client.WithKeepalive(20e6, 20e6), h2client.WithCountError(func(c string) { classes.Store(c, true) }))
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closed }))
	_, ok := classes.Load("ping_timeout")
	assert.True(t, ok)
	noClientGoroutines(t)
}

func waitChan(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-testutil.Context(t, 0).Done():
		t.Fatalf("timed out waiting: %s", what)
	}
}

func TestManyConcurrentStreamsWithMixedBodiesAllComeBackWhole(t *testing.T) {
	srv := startH2(t, true, &http2.Server{MaxConcurrentStreams: 16}, http.HandlerFunc(echo))
	cc := srv.dial(t, h2client.WithWindows(65535, 65535))
	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				payload := bytes.Repeat([]byte{byte(g), byte(i)}, (g*i*97)%40000+1)
				var body io.Reader = readyBody{bytes.NewReader(payload)}
				if (g+i)%2 == 0 {
					body = io.NopCloser(bytes.NewReader(payload))
				}
				req := request(t, "POST", srv.addr, "/echo", body)
				resp, err := cc.RoundTrip(req)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || !bytes.Equal(got, payload) {
					errs <- fmt.Errorf("goroutine %d call %d: %d bytes back of %d, %v", g, i, len(got), len(payload), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, 0, cc.State().Streams)
	noClientGoroutinesAfter(t, cc)
}
