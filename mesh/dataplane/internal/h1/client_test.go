package h1_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

func newClient(dials *atomic.Int32) *h1.Client {
	return &h1.Client{Dial: func(ctx context.Context, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}}
}

func startServer(t *testing.T, h http.HandlerFunc) string {
	ln := testutil.Listen(t)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func do(t *testing.T, cl *h1.Client, addr, method, target string, body io.Reader, size int64) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+target, body)
	require.NoError(t, err)
	req.ContentLength = size
	resp, err := cl.RoundTrip(req, addr)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(b)
}

func TestClientReusesConnectionsForSizedChunkedAndEmptyBodies(t *testing.T) {
	addr := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/chunked":
			w.Write(b)
			w.(http.Flusher).Flush()
			w.Write([]byte("!"))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Write(b)
		}
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	// Many rounds: a streamed body's connection used to reach the pool
	// only after the next request had dialled, about once in 20 rounds.
	for i := 0; i < 100; i++ {
		_, got := do(t, cl, addr, "POST", "/sized", strings.NewReader("hello"), 5)
		assert.Equal(t, "hello", got)
		resp, got := do(t, cl, addr, "POST", "/chunked", strings.NewReader("stream"), -1)
		assert.Equal(t, "stream!", got)
		assert.Equal(t, int64(-1), resp.ContentLength)
		resp, _ = do(t, cl, addr, "GET", "/empty", nil, 0)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	assert.Equal(t, int32(1), dials.Load(), "one connection carried every exchange")
}

func TestClientRetriesAnIdempotentRequestOnAConnectionTheServerClosed(t *testing.T) {
	var n atomic.Int32
	addr := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Connection", "keep-alive")
		}
		io.WriteString(w, "ok")
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	do(t, cl, addr, "GET", "/", nil, 0)
	// Close the server side of the idle connection behind the pool's back.
	cl.Sweep()
	srvDial := dials.Load()
	_ = srvDial
	_, got := do(t, cl, addr, "GET", "/", nil, 0)
	assert.Equal(t, "ok", got)
}

func TestClientRefusesAmbiguousResponsesAndRelays1xx(t *testing.T) {
	ln := testutil.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, _ := c.Read(buf)
				if strings.Contains(string(buf[:n]), "/smuggle") {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
					return
				}
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}()
		}
	}()
	var dials atomic.Int32
	cl := newClient(&dials)
	req, _ := http.NewRequest("GET", "http://x/smuggle", nil)
	_, err := cl.RoundTrip(req, ln.Addr().String())
	assert.Error(t, err, "Content-Length with Transfer-Encoding is refused")

	var hints []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, code)
		return nil
	}})
	req, _ = http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
	resp, err := cl.RoundTrip(req, ln.Addr().String())
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "ok", string(b))
	assert.Equal(t, []int{103}, hints)
}

func TestClientCancelsWithTheRequestContext(t *testing.T) {
	addr := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/", nil)
	start := time.Now()
	_, err := cl.RoundTrip(req, addr)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}
