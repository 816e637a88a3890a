package dataplane_test

import (
	"bufio"
	"crypto/tls"
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

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// forgedID is the identity an attacker claims in a header.
const forgedID = "web.shop.serviceaccount.identity.linkerd.cluster.local"

// openServerWithRoutes is a detect port whose server-level authorization
// admits anyone (as the default all-unauthenticated policy does) and
// whose only HTTP route is /allowed: over HTTP, /unrouted is 404.
func openServerWithRoutes(protocol authz.Protocol) *inbound.Server {
	return authz.ToProto(&authz.Server{
		Meta: authz.Meta{Kind: "Server", Name: "web"}, Protocol: protocol,
		Authorizations: []authz.Authorization{anyone},
		HTTPRoutes:     []authz.HTTPRoute{prefixRoute("allowed", "/allowed")},
	})
}

// forgedRequest asks for a path no route serves, claiming an identity.
func forgedRequest(lineEnd string) string {
	return "GET /unrouted HTTP/1.1" + lineEnd + "Host: web" + lineEnd + "L5d-Client-Id: " + forgedID + lineEnd +
		"Connection: close" + lineEnd + lineEnd
}

// dialTransport opens mesh TLS to a proxy's inbound listener asking for
// identity server and the transport protocol, presenting cert (nil: no
// client certificate), and sends a transport header for port. It returns
// nil when the handshake itself was refused.
func dialTransport(t *testing.T, addr, server string, roots *tls.Config, cert *tls.Certificate, port uint16, proto transport.Protocol) *tls.Conn {
	t.Helper()
	cfg := roots.Clone()
	cfg.ServerName = server
	cfg.NextProtos = []string{transport.ALPN}
	cfg.MinVersion = tls.VersionTLS13
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert == nil {
			return &tls.Certificate{}, nil
		}
		return cert, nil
	}
	d := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	require.Equal(t, transport.ALPN, c.ConnectionState().NegotiatedProtocol)
	hdr, err := transport.Header{Port: port, Protocol: proto}.Append(nil)
	require.NoError(t, err)
	if _, err := c.Write(hdr); err != nil {
		return nil
	}
	return c
}

// exchange writes raw on c and reads one response; nil when the proxy
// closed the connection instead.
func exchange(c net.Conn, raw string) *http.Response {
	if _, err := io.WriteString(c, raw); err != nil {
		return nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func rootsOf(pk *pki) *tls.Config {
	return &tls.Config{RootCAs: testutil.Pool(pk.anchor)}
}

func TestATransportHeaderFromAClientWithoutACertificateIsRefused(t *testing.T) {
	// Defect 1, first way in: mesh TLS without a client certificate, a
	// transport header declaring the session opaque, then HTTP with a
	// forged l5d-client-id to a path no route serves.
	pk := newPKI(t)
	app := startHTTPApp(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), openServerWithRoutes(authz.ProtocolDetect))
	in := testutil.Listen(t)
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in})

	for _, proto := range []transport.Protocol{transport.Opaque, transport.HTTP1, transport.HTTP2} {
		t.Run(proto.String(), func(t *testing.T) {
			c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), nil, app.port(), proto)
			if c != nil {
				resp := exchange(c, forgedRequest("\r\n"))
				assert.Nil(t, resp, "a transport header without a client identity gets no answer, the connection is refused")
			}
			assert.Zero(t, app.accepted.Load(), "nothing reached the application")
		})
	}
	assert.Equal(t, float64(3), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="no-client-identity"`))
}

func TestMalformedRequestLinesGetAnHTTPErrorNeverATCPForward(t *testing.T) {
	// Defect 1, second way in: HTTP/1 that detection did not recognise
	// was forwarded as raw TCP, forged header and unrouted path included.
	lines := map[string]string{
		"bare LF":                   forgedRequest("\n"),
		"HTTP/1.2":                  strings.Replace(forgedRequest("\r\n"), "HTTP/1.1", "HTTP/1.2", 1),
		"double space before path":  strings.Replace(forgedRequest("\r\n"), "GET /", "GET  /", 1),
		"double space before vers.": strings.Replace(forgedRequest("\r\n"), " HTTP/1.1", "  HTTP/1.1", 1),
		"tab separator":             strings.Replace(forgedRequest("\r\n"), "GET /", "GET\t/", 1),
		"leading empty line":        "\r\n" + forgedRequest("\r\n"),
		"long method":               strings.Replace(forgedRequest("\r\n"), "GET", strings.Repeat("G", 40), 1),
		"lower-case version":        strings.Replace(forgedRequest("\r\n"), "HTTP/1.1", "http/1.1", 1),
		"HTTP/0.9 line":             "GET /unrouted\r\n",
	}
	for _, port := range []struct {
		name     string
		protocol authz.Protocol
	}{{"detect", authz.ProtocolDetect}, {"HTTP/1", authz.ProtocolHTTP1}} {
		app := startHTTPApp(t)
		_, addr := plainInbound(t, openServerWithRoutes(port.protocol), app)
		for name, raw := range lines {
			t.Run(port.name+"/"+name, func(t *testing.T) {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				require.NoError(t, err)
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if resp := exchange(c, raw); resp != nil {
					assert.GreaterOrEqual(t, resp.StatusCode, 400, "an HTTP error, never the application's answer")
				}
				assert.Zero(t, app.accepted.Load(), "the bytes never reached the application as TCP")
			})
		}
	}
}

func TestNonHTTPBytesOnAnHTTPPortAreRefusedNotForwarded(t *testing.T) {
	// A port whose Server says HTTP/1 is never downgraded to opaque.
	app := startHTTPApp(t)
	r, addr := plainInbound(t, openServerWithRoutes(authz.ProtocolHTTP1), app)
	for name, raw := range map[string]string{
		"binary": "\x00\x01\x02\x03 not http at all",
		"tls":    "\x16\x03\x01\x00\x05hello",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if resp := exchange(c, raw); resp != nil {
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			}
			assert.Zero(t, app.accepted.Load(), "nothing reached the application")
		})
	}
	assert.Equal(t, float64(2), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="not-http"`))
}

// readUntilClosed reads c in the background and reports when the proxy
// closed it.
func readUntilClosed(c net.Conn) *atomic.Bool {
	var closed atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, c)
		closed.Store(true)
	}()
	return &closed
}

func TestARequestLineIncompleteAtTheDetectTimeoutIsNotForwarded(t *testing.T) {
	// Defect 1, third way in: the request line is still incomplete when
	// the detection timeout fires. "GET /" is already HTTP to detection:
	// the HTTP server waits for the rest (its header timeout, here 500ms)
	// and closes. A shorter start, or the beginning of the HTTP/2
	// preface, is refused at the detect timeout (here 1s).
	app := startHTTPApp(t)
	cfg := testConfig()
	cfg.DetectTimeout = time.Second
	cfg.HTTPHeaderTimeout = 500 * time.Millisecond
	r, addr := plainInboundWith(t, cfg, openServerWithRoutes(authz.ProtocolDetect), app)
	for _, partial := range []string{"GET /unrouted HTTP/1.", "G", "PRI * HTTP/2.0\r\n"} {
		t.Run(partial, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(15 * time.Second))
			_, err = io.WriteString(c, partial)
			require.NoError(t, err)
			closed := readUntilClosed(c)
			// Whichever comes first after the detect timeout: the
			// proxy closes the connection, or it dials the application.
			testutil.Eventually(t, 10*time.Second, func() bool {
				return closed.Load() || app.accepted.Load() > 0
			}, "the proxy decided what to do with the connection")
			if !closed.Load() {
				rest := strings.TrimPrefix(forgedRequest("\r\n"), partial)
				_, _ = io.WriteString(c, rest)
			}
			assert.Zero(t, app.accepted.Load(), "the partial request was not forwarded as TCP")
			assert.Zero(t, app.requests.Load())
		})
	}
	assert.Equal(t, float64(2), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="incomplete-request"`))
}

func TestConnectAtTheInboundGets405(t *testing.T) {
	app := startHTTPApp(t)
	_, addr := plainInbound(t, allowAll(t), app)
	resp, _ := rawExchange(t, addr, "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Zero(t, app.accepted.Load())
}

func TestTheInboundNeverForwardsToTheProxysOwnListeners(t *testing.T) {
	// Defect 2: a transport header naming the admin port reached
	// /shutdown from 127.0.0.1 and stopped the proxy.
	pk := newPKI(t)
	cfg := testConfig()
	cfg.AdminShutdown = true
	cfg.TapIdentities = []string{"tap.weft-viz.serviceaccount.identity.weft.cluster.local"}
	in, out, admin, tap := testutil.Listen(t), testutil.Listen(t), testutil.Listen(t), testutil.Listen(t)
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: in, Outbound: out, Admin: admin, Tap: tap})
	client := pk.identity(t, idA)
	cert, err := client.Certificate()
	require.NoError(t, err)
	portOf := func(l net.Listener) uint16 { return uint16(l.Addr().(*net.TCPAddr).Port) }
	for _, target := range []struct {
		name string
		port uint16
	}{{"admin", portOf(admin)}, {"inbound", portOf(in)}, {"outbound", portOf(out)}, {"tap", portOf(tap)}} {
		for _, proto := range []transport.Protocol{transport.HTTP1, transport.Opaque} {
			t.Run(target.name+"/"+proto.String(), func(t *testing.T) {
				c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, target.port, proto)
				require.NotNil(t, c, "a meshed client completes the handshake")
				resp := exchange(c, "POST /shutdown HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
				if resp != nil {
					assert.NotEqual(t, http.StatusAccepted, resp.StatusCode)
				}
				require.NoError(t, r.proxy.Ready(), "the proxy is still serving")
			})
		}
	}
	select {
	case <-r.done:
		t.Fatal("the proxy stopped")
	default:
	}
	assert.Equal(t, float64(8), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="own-port"`))
}

func TestShutdownAnswersOnlyClientsThatReachedTheAdminServerDirectly(t *testing.T) {
	// An embedder serves the admin handler on a listener the proxy does
	// not know; a meshed client asks the inbound to forward there.
	pk := newPKI(t)
	cfg := testConfig()
	cfg.AdminShutdown = true
	in := testutil.Listen(t)
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: in})
	extra := testutil.Listen(t)
	srv := &http.Server{Handler: r.proxy.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(extra)
	t.Cleanup(func() { srv.Close() })
	client := pk.identity(t, idA)
	cert, err := client.Certificate()
	require.NoError(t, err)
	c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, uint16(extra.Addr().(*net.TCPAddr).Port), transport.HTTP1)
	require.NotNil(t, c)
	resp := exchange(c, "POST /shutdown HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n")
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a request the proxy forwarded is not a loopback client")
	require.NoError(t, r.proxy.Ready())
}

// openSilent opens n connections to addr that send nothing and waits until
// the proxy closed every one of them.
func openSilent(t *testing.T, addr string, n int) (waitClosed func()) {
	t.Helper()
	var wg sync.WaitGroup
	var closedByProxy atomic.Int32
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			var b [1]byte
			if _, err := c.Read(b[:]); err == io.EOF {
				closedByProxy.Add(1)
			}
		}()
	}
	return func() {
		wg.Wait()
		assert.Equal(t, int32(n), closedByProxy.Load(), "every silent connection was closed by the proxy")
	}
}

func TestSilentConnectionsAreClosedAtTheDetectTimeoutNotDialled(t *testing.T) {
	// 1,000 silent sockets made 817 upstream dials; a connection that sent
	// nothing is closed. Counted by dials (accepted connections), not by
	// latency.
	const silent = 100
	short := func(c *dataplane.Config) { c.DetectTimeout = time.Second }
	t.Run("outbound", func(t *testing.T) {
		hp := startHTTPPair(t, httpPairOptions{cfgA: short, cfgB: short})
		before := hp.inB.accepted.Load()
		wait := openSilent(t, hp.clientAddr, silent)
		c := h1Client()
		for i := 0; i < 5; i++ {
			resp, _ := get(t, c, hp.url("/"))
			assert.Equal(t, http.StatusOK, resp.StatusCode, "real requests are served meanwhile")
		}
		wait()
		assert.LessOrEqual(t, hp.inB.accepted.Load()-before, int32(1), "only the real requests' pooled connection was dialled")
		assert.Equal(t, float64(silent), hp.a.metric(t, "tcp_refused_total", `direction="outbound"`, `reason="silent"`))
	})
	t.Run("inbound", func(t *testing.T) {
		app := startHTTPApp(t)
		cfg := testConfig()
		short(&cfg)
		r, addr := plainInboundWith(t, cfg, allowAll(t), app)
		wait := openSilent(t, addr, silent)
		for i := 0; i < 5; i++ {
			resp, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: web\r\n\r\n")
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}
		wait()
		assert.LessOrEqual(t, app.accepted.Load(), int32(5), "only the real requests reached the application")
		assert.Equal(t, float64(silent), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="silent"`))
	})
}
