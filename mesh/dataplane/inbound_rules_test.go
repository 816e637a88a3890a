package dataplane_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestOpaqueBytesOnADetectPortWithRoutesNeedAServerLevelAuthorization(t *testing.T) {
	// Routes admit HTTP requests; only the server's own authorizations
	// admit bytes that are not HTTP.
	binary := "\x00\x01\x02\x03 binary"
	t.Run("route-level authorization only", func(t *testing.T) {
		app := startHTTPApp(t)
		r, addr := plainInbound(t, routedServer(authz.ProtocolDetect, prefixRoute("allowed", "/allowed")), app)
		resp, _ := rawExchange(t, addr, "GET /allowed HTTP/1.1\r\nHost: web\r\n\r\n")
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the route admits HTTP")
		accepted := app.accepted.Load()
		_, err := echoOnce(t, addr, binary)
		assert.Error(t, err, "opaque bytes are refused")
		assert.Equal(t, accepted, app.accepted.Load(), "nothing more reached the application")
		assert.Equal(t, float64(1), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="opaque-on-http-routes"`))
	})
	t.Run("server-level authorization", func(t *testing.T) {
		app := startHTTPApp(t)
		r, addr := plainInbound(t, openServerWithRoutes(authz.ProtocolDetect), app)
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, binary)
		require.NoError(t, err)
		testutil.Eventually(t, 10*time.Second, func() bool { return app.accepted.Load() == 1 }, "the opaque bytes forwarded")
		assert.Equal(t, float64(1), r.metric(t, "inbound_tcp_authz_allow_total", `authz_kind="authorizationpolicy"`, `authz_name="anyone"`))
	})
}

func TestHTTPPortsServeHTTPEvenUnderAnOpaqueTransportHeader(t *testing.T) {
	// A meshed peer declaring the session opaque on a port whose Server
	// says HTTP/1 still gets HTTP: policy by route, header hygiene.
	pk := newPKI(t)
	app := startHTTPApp(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), openServerWithRoutes(authz.ProtocolHTTP1))
	in := testutil.Listen(t)
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in})
	cert, err := pk.identity(t, idA).Certificate()
	require.NoError(t, err)
	open := func() *tls.Conn {
		c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, app.port(), transport.Opaque)
		require.NotNil(t, c)
		return c
	}

	resp := exchange(open(), forgedRequest("\r\n"))
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "no route serves /unrouted")
	assert.Zero(t, app.requests.Load())

	resp = exchange(open(), "GET /allowed HTTP/1.1\r\nHost: web\r\nL5d-Client-Id: "+forgedID+"\r\n\r\n")
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{idA}, app.last().Header["L5d-Client-Id"], "the verified identity, never the forged one")

	resp = exchange(open(), "\x00\x01 not http")
	if resp != nil {
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
	assert.Equal(t, float64(1), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="not-http"`))
}

func TestTheInboundClaimsOnlyIdentitiesItVerified(t *testing.T) {
	// Mesh TLS on a redirected connection, with and without a client
	// certificate: the application sees the verified identity or none.
	pk := newPKI(t)
	app := startHTTPApp(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), allowAll(t))
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) { return netipAddrPort(app.port()), nil }
	startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, dataplane.WithOriginalDestination(orig))
	cert, err := pk.identity(t, idA).Certificate()
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		cert *tls.Certificate
		want []string
	}{{"without a certificate", nil, nil}, {"with a certificate", cert, []string{idA}}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := &tls.Config{ServerName: idB, RootCAs: testutil.Pool(pk.anchor), MinVersion: tls.VersionTLS13,
				GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if c.cert == nil {
						return &tls.Certificate{}, nil
					}
					return c.cert, nil
				}}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", in.Addr().String(), cfg)
			require.NoError(t, err)
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			resp := exchange(conn, "GET /headers HTTP/1.1\r\nHost: web\r\nL5d-Client-Id: "+forgedID+"\r\n\r\n")
			require.NotNil(t, resp)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, c.want, app.last().Header["L5d-Client-Id"])
		})
	}
}

func TestMeshHeadersInRequestTrailersNeverReachTheApplication(t *testing.T) {
	seenTrailer := make(chan http.Header, 4)
	app := startHTTPApp(t)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		seenTrailer <- r.Trailer.Clone()
	}
	raw := "POST /echo HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum, L5d-Client-Id\r\n\r\n" +
		"5\r\nhello\r\n0\r\nX-Checksum: 1\r\nL5d-Client-Id: " + forgedID + "\r\n\r\n"
	_, inAddr := plainInbound(t, allowAll(t), app)
	hp := startHTTPPair(t, httpPairOptions{app: app, serverPolicy: allowAll(t)})
	for name, addr := range map[string]string{"plaintext to the inbound": inAddr, "across the mesh": hp.clientAddr} {
		t.Run(name, func(t *testing.T) {
			resp, _ := rawExchange(t, addr, raw)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			select {
			case tr := <-seenTrailer:
				assert.Equal(t, []string{"1"}, tr["X-Checksum"], "ordinary trailers pass")
				assert.Empty(t, tr["L5d-Client-Id"], "a mesh header sent as a trailer is dropped")
			case <-time.After(10 * time.Second):
				t.Fatal("the application saw no request")
			}
		})
	}
}

func TestListenersBoundLaterAreTheProxysOwnToo(t *testing.T) {
	pk := newPKI(t)
	in := testutil.Listen(t)
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: in})
	echo := startEcho(t, "")
	owned := r.proxy.Own(echo.ln)
	cert, err := pk.identity(t, idA).Certificate()
	require.NoError(t, err)
	c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, echo.port(), transport.Opaque)
	require.NotNil(t, c)
	_, err = io.WriteString(c, "hello")
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "the connection was refused")
	assert.Zero(t, echo.accepted.Load(), "nothing reached a listener the proxy owns")
	assert.Equal(t, float64(1), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="own-port"`))

	// Closed, the port is no longer the proxy's: a header naming it is
	// forwarded (and fails to connect), not refused as one of its own.
	require.NoError(t, owned.Close())
	c = dialTransport(t, in.Addr().String(), idB, rootsOf(pk), cert, echo.port(), transport.Opaque)
	require.NotNil(t, c)
	_, _ = c.Read(make([]byte, 1))
	assert.Equal(t, float64(1), r.metric(t, "tcp_refused_total", `direction="inbound"`, `reason="own-port"`))
}
