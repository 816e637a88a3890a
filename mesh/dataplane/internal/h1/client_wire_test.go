package h1_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
)

// rawUpstream accepts connections on loopback; for each request it reads
// (parsed by net/http, the independent reader) it calls answer, which
// returns the raw bytes to send back and whether to close afterwards.
func rawUpstream(t *testing.T, answer func(r *http.Request, body []byte) (string, bool)) string {
	t.Helper()
	ln := testutil.Listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body, err := io.ReadAll(r.Body)
					if err != nil {
						return
					}
					out, closeAfter := answer(r, body)
					if _, err := io.WriteString(c, out); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestClientRefusesMalformedResponseHeads(t *testing.T) {
	// The client reads responses as strictly as the server reads requests:
	// each of these is an error, never a response handed on.
	cases := map[string]string{
		"bare LF":                          "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
		"obs-fold":                         "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\nContent-Length: 0\r\n\r\n",
		"NUL in a value":                   "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n",
		"space before the colon":           "HTTP/1.1 200 OK\r\nX-A : 1\r\nContent-Length: 0\r\n\r\n",
		"no colon":                         "HTTP/1.1 200 OK\r\nX-A\r\nContent-Length: 0\r\n\r\n",
		"status line without a code":       "HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/2 status line":               "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"Content-Length and chunked":       "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"two Content-Lengths that differ":  "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"Content-Length not digits":        "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nab",
		"chunked on HTTP/1.0":              "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"a coding besides chunked":         "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"a coding other than chunked":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok",
		"announced trailer not a name":     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X A\r\n\r\n0\r\n\r\n",
		"announced trailer with a control": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\x01\r\n\r\n0\r\n\r\n",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) { return raw, true })
			var dials atomic.Int32
			cl := newClient(&dials)
			req, err := http.NewRequest("GET", "http://x/", nil)
			require.NoError(t, err)
			resp, err := cl.RoundTrip(req, addr)
			if err == nil {
				resp.Body.Close()
			}
			require.Error(t, err)
			assert.Equal(t, 0, h1.StatusOf(err), "a bad response is not an answer to send the client")
		})
	}
}

func TestClientRefusesAnInvalidContentLengthEvenWithoutABody(t *testing.T) {
	// The field of a HEAD answer is handed on to the client as it is.
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", true
	})
	var dials atomic.Int32
	req, err := http.NewRequest(http.MethodHead, "http://x/", nil)
	require.NoError(t, err)
	_, err = newClient(&dials).RoundTrip(req, addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Content-Length")
}

func TestClientAcceptsUnderscoresAndRepeatedEqualLengthsInResponses(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nX_Legacy: 1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", false
	})
	var dials atomic.Int32
	resp, got := do(t, newClient(&dials), addr, "GET", "/", nil, 0)
	assert.Equal(t, "ok", got)
	assert.Equal(t, "1", resp.Header.Get("X_Legacy"), "an upstream names its fields as it likes")
}

func TestClientSendsAnnouncedTrailersButNeitherForbiddenNorOmittedOnes(t *testing.T) {
	// net/http, reading on the other side, refuses a Content-Length
	// announced as a trailer and keeps only announced trailers.
	got := make(chan http.Header, 1)
	addr := rawUpstream(t, func(r *http.Request, _ []byte) (string, bool) {
		got <- r.Trailer
		return "HTTP/1.1 204 No Content\r\n\r\n", false
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.OmitTrailer = func(name string) bool { return strings.HasPrefix(name, "Secret-") }
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", "http://x/up", pr)
	require.NoError(t, err)
	req.ContentLength = -1
	req.Trailer = http.Header{"X-Sum": nil, "Secret-Token": nil, "Content-Length": nil}
	go func() {
		_, _ = io.WriteString(pw, "data")
		req.Trailer.Set("X-Sum", "42")
		req.Trailer.Set("Secret-Token", "t")
		req.Trailer.Set("Content-Length", "9")
		pw.Close()
	}()
	resp, err := cl.RoundTrip(req, addr)
	require.NoError(t, err)
	resp.Body.Close()
	select {
	case tr := <-got:
		assert.Equal(t, http.Header{"X-Sum": {"42"}}, tr)
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the request")
	}
}

func TestClientRefusesToSendWhatItWouldNotAccept(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		t.Error("nothing may reach the upstream")
		return "", true
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	for name, mod := range map[string]func(*http.Request){
		"CRLF in a value":      func(r *http.Request) { r.Header["X-A"] = []string{"a\r\nX-Injected: 1"} },
		"space in a name":      func(r *http.Request) { r.Header["X A"] = []string{"1"} },
		"lower case method":    func(r *http.Request) { r.Method = "get" },
		"host with a slash":    func(r *http.Request) { r.Host = "a/b" },
		"fragment in a target": func(r *http.Request) { r.URL.RawQuery = "a#b" },
		"underscore in a name": func(r *http.Request) { r.Header["X_A"] = []string{"1"} },
	} {
		req, err := http.NewRequest("GET", "http://x/", nil)
		require.NoError(t, err)
		mod(req)
		_, err = cl.RoundTrip(req, addr)
		assert.Error(t, err, name)
	}
}

func TestClientClosesConnectionsTheUpstreamDoesNotKeep(t *testing.T) {
	// Connection: close, HTTP/1.0 without keep-alive, and a body that runs
	// to the end of the connection each leave the connection unusable.
	for name, raw := range map[string]string{
		"Connection: close": "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0":          "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"unframed body":     "HTTP/1.1 200 OK\r\n\r\nok",
	} {
		t.Run(name, func(t *testing.T) {
			addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) { return raw, true })
			var dials atomic.Int32
			cl := newClient(&dials)
			for i := 0; i < 2; i++ {
				resp, got := do(t, cl, addr, "GET", "/", nil, 0)
				assert.Equal(t, "ok", got)
				assert.True(t, resp.Close)
			}
			assert.Equal(t, int32(2), dials.Load(), "no connection was reused")
		})
	}
}

func TestClientEndsTheExchangeWhenTheRequestBodyFails(t *testing.T) {
	// The upstream waits for the whole body; the body breaks off instead.
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", "http://x/", pr)
	require.NoError(t, err)
	req.ContentLength = -1
	broken := errors.New("sender went away")
	go func() {
		_, _ = io.WriteString(pw, "part")
		pw.CloseWithError(broken)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.RoundTrip(req.WithContext(ctx), addr)
	var be *h1.RequestBodyError
	require.ErrorAs(t, err, &be)
	assert.ErrorIs(t, err, broken)
	require.NoError(t, ctx.Err(), "the exchange ended at once, not at the deadline")

	_, got := do(t, cl, addr, "GET", "/", nil, 0)
	assert.Empty(t, got)
	assert.Equal(t, int32(2), dials.Load(), "the broken connection was not reused")
}

func TestClientRefusesRequestsOnceClosed(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	do(t, cl, addr, "GET", "/", nil, 0)
	cl.CloseIdle(true)
	req, err := http.NewRequest("GET", "http://x/", nil)
	require.NoError(t, err)
	_, err = cl.RoundTrip(req, addr)
	assert.ErrorIs(t, err, h1.ErrClientClosed)
	assert.Equal(t, int32(1), dials.Load())
}

func TestClientBoundsResponseHeads(t *testing.T) {
	addr := rawUpstream(t, func(*http.Request, []byte) (string, bool) {
		return "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("a", 100)+"\r\n", 50) + "Content-Length: 0\r\n\r\n", true
	})
	var dials atomic.Int32
	cl := newClient(&dials)
	cl.Limits = h1.Limits{MaxHeaderBytes: 2048}
	req, err := http.NewRequest("GET", "http://x/", nil)
	require.NoError(t, err)
	_, err = cl.RoundTrip(req, addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too large")

	cl.Limits = h1.Limits{MaxHeaders: 10}
	_, err = cl.RoundTrip(req, addr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "too many")
}
