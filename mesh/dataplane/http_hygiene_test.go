package dataplane_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// plainInbound is a server proxy whose inbound listener pretends every
// connection was redirected to the app's port, for clients without mesh
// TLS.
func plainInbound(t *testing.T, policy *inbound.Server, app *httpApp) (*running, string) {
	return plainInboundWith(t, testConfig(), policy, app)
}

// plainInboundWith is plainInbound with a configuration of its own.
func plainInboundWith(t *testing.T, cfg dataplane.Config, policy *inbound.Server, app *httpApp) (*running, string) {
	pk := newPKI(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), policy)
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), nil
	}
	r := startProxy(t, cfg, pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, dataplane.WithOriginalDestination(orig))
	return r, in.Addr().String()
}

// rawExchange writes raw bytes on a new connection and reads one response.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, raw)
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestSmugglingAttemptsAreRefusedBeforeAnythingIsForwarded(t *testing.T) {
	// T01-T04 through both listeners: the outbound proxy (from the
	// application) and the inbound proxy (from a plaintext client).
	outApp, inApp := startHTTPApp(t), startHTTPApp(t)
	hp := startHTTPPair(t, httpPairOptions{app: outApp})
	_, inAddr := plainInbound(t, allowAll(t), inApp)
	// Refusals first; the broken chunked bodies (status 0) last, since
	// their heads do reach the application before the body fails.
	cases := []struct {
		name   string
		raw    string
		status int
	}{
		{"CL+TE", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"TE space colon", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE list", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
		{"TE unknown", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"duplicate CL", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", 400},
		{"NUL in value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n", 400},
		{"underscore", "GET / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 1.1.1.1\r\n\r\n", 400},
		{"HTTP/1.0 with TE", "POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"lower-case method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"long request line", "GET /" + strings.Repeat("a", 10000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"huge header", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("b", 70000) + "\r\n\r\n", 431},
		{"bare LF chunk size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 0},
		{"unterminated chunkext", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=\"x\r\nhello\r\n0\r\n\r\n", 0},
	}
	for _, addr := range []struct {
		name, addr string
		app        *httpApp
	}{{"outbound", hp.clientAddr, outApp}, {"inbound", inAddr, inApp}} {
		app := addr.app
		for _, c := range cases {
			t.Run(addr.name+"/"+c.name, func(t *testing.T) {
				before := app.requests.Load()
				conn, err := net.DialTimeout("tcp", addr.addr, 2*time.Second)
				require.NoError(t, err)
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(conn, c.raw)
				br := bufio.NewReader(conn)
				resp, err := http.ReadResponse(br, nil)
				if c.status == 0 {
					// A broken chunked body: the stream is aborted (an
					// error status or a closed connection), never a 2xx.
					if err == nil {
						assert.GreaterOrEqual(t, resp.StatusCode, 400)
					}
				} else {
					require.NoError(t, err)
					assert.Equal(t, c.status, resp.StatusCode)
					assert.True(t, resp.Close, "the connection ends after a refusal")
				}
				if c.status != 0 {
					assert.Equal(t, before, app.requests.Load(), "nothing reached the application")
				}
			})
		}
	}
	for _, app := range []*httpApp{outApp, inApp} {
		for _, s := range app.log {
			assert.NotEqual(t, "/smuggled", s.RequestURI, "no request was smuggled behind a body")
		}
	}
}

func TestHopByHopAndNominatedHeadersNeverReachTheApplication(t *testing.T) {
	// T05.
	hp := startHTTPPair(t, httpPairOptions{})
	raw := "GET /headers HTTP/1.1\r\nHost: web\r\n" +
		"Connection: \r\nConnection: X-Forwarded-For, l5d-client-id\r\nConnection: keep-alive, X-Custom\r\n" +
		"X-Forwarded-For: 203.0.113.7\r\nX-Custom: drop-me\r\nL5d-Client-Id: forged.identity\r\n" +
		"Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers, gzip\r\nX-Keep: yes\r\n\r\n"
	resp, body := rawExchange(t, hp.clientAddr, raw)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got http.Header
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	for _, k := range []string{"X-Forwarded-For", "X-Custom", "Keep-Alive", "Proxy-Connection", "Connection"} {
		assert.Empty(t, got[k], k)
	}
	assert.Equal(t, []string{"yes"}, got["X-Keep"])
	assert.Equal(t, []string{idA}, got["L5d-Client-Id"], "the mesh header is regenerated from the verified identity")
}

func TestH2CUpgradesAreNeverForwarded(t *testing.T) {
	// T05/T16: the request goes on as plain HTTP/1 and its body, shaped
	// like HTTP/2 frames, arrives as bytes.
	hp := startHTTPPair(t, httpPairOptions{})
	frames := "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
	raw := fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: web\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: %d\r\n\r\n%s", len(frames), frames)
	resp, body := rawExchange(t, hp.clientAddr, raw)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no 101: the upgrade is not honoured")
	assert.Equal(t, frames, body, "the body was never read as frames")
	last := hp.app.last()
	assert.Empty(t, last.Header["Upgrade"])
	assert.Empty(t, last.Header["Http2-Settings"])
	assert.Equal(t, "HTTP/1.1", last.Proto)
}

func TestH2CPriorKnowledgeIsRefusedOnAnHTTP1Port(t *testing.T) {
	// T16: a port whose Server says HTTP/1 does not accept cleartext
	// HTTP/2 from an unmeshed client.
	app := startHTTPApp(t)
	srv := allowAll(t)
	srv.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http1_{Http1: &inbound.ProxyProtocol_Http1{}}}
	r, addr := plainInbound(t, srv, app)
	_, err := h2cClient().Get("http://" + addr + "/")
	assert.Error(t, err)
	assert.Zero(t, app.requests.Load())
	assert.Equal(t, 1.0, r.metric(t, "http_protocol_errors_total", `reason="h2c-on-http1-port"`))
	resp, _ := get(t, h1Client(), "http://"+addr+"/")
	assert.Equal(t, http.StatusOK, resp.StatusCode, "HTTP/1 is served")
}

func TestInformationalResponsesLoseTheirHopByHopHeaders(t *testing.T) {
	// T05: hop-by-hop headers in 1xx responses.
	app := startHTTPApp(t)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.Header().Set("Connection", "X-Hint")
		w.Header().Set("X-Hint", "secret")
		w.Header().Set("Keep-Alive", "timeout=1")
		w.WriteHeader(http.StatusEarlyHints)
		for k := range w.Header() {
			delete(w.Header(), k)
		}
		io.WriteString(w, "final")
	}
	hp := startHTTPPair(t, httpPairOptions{app: app})
	c, err := net.DialTimeout("tcp", hp.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: web\r\n\r\n")
	br := bufio.NewReader(c)
	hints, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusEarlyHints, hints.StatusCode, "the 103 is relayed")
	assert.Equal(t, "</style.css>; rel=preload", hints.Header.Get("Link"))
	assert.Empty(t, hints.Header.Get("X-Hint"))
	assert.Empty(t, hints.Header.Get("Keep-Alive"))
	final, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(final.Body)
	assert.Equal(t, "final", string(b))
}

func TestUpgradeAnsweredWithoutSwitchingIsNotTunnelled(t *testing.T) {
	// T06: the application answers 200 to an Upgrade request.
	hp := startHTTPPair(t, httpPairOptions{})
	c, err := net.DialTimeout("tcp", hp.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /plain HTTP/1.1\r\nHost: web\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	io.ReadAll(resp.Body)
	before := hp.app.requests.Load()
	io.WriteString(c, "GET /smuggled HTTP/1.1\r\nHost: web\r\n\r\n")
	_, err = http.ReadResponse(br, nil)
	assert.Error(t, err, "the connection was closed, not turned into a tunnel")
	assert.Equal(t, before, hp.app.requests.Load())
	for _, s := range hp.app.log {
		assert.NotEqual(t, "/smuggled", s.RequestURI)
	}
}

func TestWebSocketUpgradesTunnelAfter101(t *testing.T) {
	app := startHTTPApp(t)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		rw.Flush()
		io.Copy(conn, rw)
	}
	hp := startHTTPPair(t, httpPairOptions{app: app})
	c, err := net.DialTimeout("tcp", hp.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: web\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	assert.Equal(t, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", resp.Header.Get("Sec-WebSocket-Accept"))
	for _, msg := range []string{"frame-one", "frame-two"} {
		io.WriteString(c, msg)
		buf := make([]byte, len(msg))
		_, err = io.ReadFull(br, buf)
		require.NoError(t, err)
		assert.Equal(t, msg, string(buf), "bytes flow both ways through the tunnel")
	}
	assert.Equal(t, []string{idA}, hp.app.last().Header["L5d-Client-Id"], "the upgrade crossed the mesh with mesh TLS")
}

func TestConnectInsideHTTPIsRefused(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	resp, _ := rawExchange(t, hp.clientAddr, "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "connect-refused")
	assert.Zero(t, hp.app.requests.Load())
}
