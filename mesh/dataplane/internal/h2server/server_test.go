package h2server

//lint:file-ignore SA1019 x/net's HTTP/2 Transport is the independent client the server is tested against.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
)

// testServer serves h2c on a loopback listener with ServeConn.
type testServer struct {
	addr   string
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  atomic.Int64
	ended  atomic.Int64
	errs   sync.Map // class -> *atomic.Int64
}

func startServer(t *testing.T, h http.Handler, tweak func(*Config)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: ln.Addr().String(), cancel: cancel}
	cfg := &Config{MaxConcurrentStreams: 100, MaxHeaderBytes: 64 << 10, StreamWindow: 1 << 20, ConnectionWindow: 4 << 20}
	cfg.CountError = func(class string) {
		v, _ := ts.errs.LoadOrStore(class, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	if tweak != nil {
		tweak(cfg)
	}
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ts.conns.Add(1)
			ts.wg.Add(1)
			go func() {
				defer ts.wg.Done()
				ServeConn(ctx, c, h, cfg)
				ts.ended.Add(1)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		cancel()
		done := make(chan struct{})
		go func() { ts.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("connections did not end after shutdown")
		}
	})
	return ts
}

func (ts *testServer) errCount(class string) int64 {
	if v, ok := ts.errs.Load(class); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// h2cClient is x/net's HTTP/2 client over plain TCP.
func h2cClient(t testing.TB) *http.Client {
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// grpcFrame is a gRPC length-prefixed message.
func grpcFrame(msg []byte) []byte {
	b := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(b[1:], uint32(len(msg)))
	copy(b[5:], msg)
	return b
}

// unaryHandler answers a gRPC-like call: it reads the request message
// and answers with it and trailers.
func unaryHandler(w http.ResponseWriter, r *http.Request) {
	req, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(req)
	w.Header().Set("Grpc-Status", "0")
	w.Header().Set(http.TrailerPrefix+"Grpc-Message", "ok")
}

func TestAUnaryCallGetsItsBodyAndTrailers(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(unaryHandler), nil)
	c := h2cClient(t)
	msg := grpcFrame([]byte("hello"))
	resp, err := c.Post("http://"+ts.addr+"/svc/Method", "application/grpc", bytes.NewReader(msg))
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, msg, got)
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, "application/grpc", resp.Header.Get("Content-Type"))
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
	assert.Equal(t, "ok", resp.Trailer.Get("Grpc-Message"))
}

func TestTheHandlerSeesTheRequestAsNetHTTPWould(t *testing.T) {
	type seen struct {
		method, host, path, query, proto, remote, uri string
		major                                         int
		cl                                            int64
		hdr                                           string
		trailer                                       http.Header
		body                                          string
	}
	got := make(chan seen, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Host, r.URL.Path, r.URL.RawQuery, r.Proto, r.RemoteAddr, r.RequestURI, r.ProtoMajor, r.ContentLength, r.Header.Get("X-Test"), r.Trailer.Clone(), string(b)}
	}), nil)
	c := h2cClient(t)
	req, err := http.NewRequest("PUT", "http://"+ts.addr+"/a/b?c=d", io.NopCloser(strings.NewReader("body!")))
	require.NoError(t, err)
	req.Header.Set("X-Test", "v")
	req.Trailer = http.Header{"X-Sum": nil}
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	var s seen
	select {
	case s = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("handler not called")
	}
	assert.Equal(t, "PUT", s.method)
	assert.Equal(t, ts.addr, s.host)
	assert.Equal(t, "/a/b", s.path)
	assert.Equal(t, "c=d", s.query)
	assert.Equal(t, "/a/b?c=d", s.uri)
	assert.Equal(t, "HTTP/2.0", s.proto)
	assert.Equal(t, 2, s.major)
	assert.Equal(t, int64(-1), s.cl)
	assert.Equal(t, "v", s.hdr)
	assert.Equal(t, "body!", s.body)
	assert.Contains(t, s.trailer, "X-Sum")
	assert.NotEmpty(t, s.remote)
}

func TestBodiesBeyondTheWindowsFlowBothWays(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}), func(c *Config) {
		c.StreamWindow, c.ConnectionWindow = 65535, 65535
		// The four echoes may each hold a full stream window unread while
		// their handlers wait to write: room for all of them (the default,
		// twice the connection window, would drop one; see BufferLimit).
		c.BufferLimit = 4 * 65535
	})
	c := h2cClient(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Post("http://"+ts.addr+"/echo", "application/octet-stream", bytes.NewReader(payload))
			if !assert.NoError(t, err) {
				return
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			assert.NoError(t, err)
			assert.True(t, bytes.Equal(payload, got), "echoed %d bytes", len(got))
		}()
	}
	wg.Wait()
}

func TestBidiStreamingWorksWhenTheClientWaitsForHeadersFirst(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		buf := make([]byte, 64)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				break
			}
		}
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
	}), nil)
	c := h2cClient(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", "http://"+ts.addr+"/bidi", pr)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err, "headers arrive before any request data")
	defer resp.Body.Close()
	for i := 0; i < 5; i++ {
		msg := []byte(strings.Repeat(string(rune('a'+i)), 10))
		_, err := pw.Write(msg)
		require.NoError(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(resp.Body, got)
		require.NoError(t, err)
		assert.Equal(t, msg, got)
	}
	pw.Close()
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Empty(t, rest)
	assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
}

func TestClientCancellationCancelsTheHandler(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		cancelled <- r.Context().Err()
	}), nil)
	c := h2cClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+ts.addr+"/wait", nil)
	resp, err := c.Do(req)
	require.NoError(t, err)
	<-started
	cancel()
	resp.Body.Close()
	select {
	case err := <-cancelled:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled by RST_STREAM")
	}
}

func TestGracefulShutdownFinishesStreamsInFlight(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "finished")
	}), nil)
	c := h2cClient(t)
	type result struct {
		body string
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := c.Get("http://" + ts.addr + "/slow")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{string(b), err}
	}()
	<-started
	ts.cancel() // GOAWAY
	close(release)
	r := <-res
	require.NoError(t, r.err)
	assert.Equal(t, "finished", r.body)
	require.Eventually(t, func() bool { return ts.ended.Load() == ts.conns.Load() }, 5*time.Second, 10*time.Millisecond,
		"the connection ends once its stream is done")
}

func TestStreamsBeyondTheLimitAreRefused(t *testing.T) {
	release := make(chan struct{})
	var running atomic.Int32
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		<-release
	}), func(c *Config) { c.MaxConcurrentStreams = 2 })
	h := dialRaw(t, ts.addr)
	for id := uint32(1); id <= 5; id += 2 {
		h.headers(id, true, "GET", "/")
	}
	code, ok := h.waitReset(5)
	require.True(t, ok, "the third stream is reset")
	assert.Equal(t, http2.ErrCodeRefusedStream, code)
	close(release)
	assert.Equal(t, int32(2), running.Load())
}

func TestResponsesKeepNetHTTPsBodyRules(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/trailers-only":
			w.Header().Set("Grpc-Status", "14")
			w.WriteHeader(200)
		case "/continue":
			b, err := io.ReadAll(r.Body)
			if err == nil {
				_, _ = w.Write(b)
			}
		default:
			_, err := io.WriteString(w, "dropped for HEAD")
			if err != nil {
				w.Header().Set("X-Err", err.Error())
			}
		}
	}), nil)
	c := h2cClient(t)

	resp, err := c.Head("http://" + ts.addr + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Empty(t, b, "a HEAD response has no body")

	resp, err = c.Get("http://" + ts.addr + "/trailers-only")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Empty(t, b)
	assert.Equal(t, "14", resp.Header.Get("Grpc-Status"))
	assert.Equal(t, int64(0), resp.ContentLength, "a complete empty response declares its length")

	req, err := http.NewRequest("POST", "http://"+ts.addr+"/continue", strings.NewReader("after 100"))
	require.NoError(t, err)
	req.Header.Set("Expect", "100-continue")
	resp, err = c.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "after 100", string(b))
}
