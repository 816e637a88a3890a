package dataplane_test

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// denyEverything is a Server with no authorization: every client is denied.
func denyEverything(protocol authz.Protocol) *inbound.Server {
	return authz.ToProto(&authz.Server{Meta: authz.Meta{Kind: "Server", Name: "locked"}, Protocol: protocol,
		HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()}})
}

// loopbackInbound runs an inbound proxy in front of port whose policy is
// pol; every connection to it comes from 127.0.0.1.
func loopbackInbound(t *testing.T, port uint16, pol *inbound.Server, opts ...dataplane.Option) (*running, string) {
	t.Helper()
	pk := newPKI(t)
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(port), pol)
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), nil
	}
	opts = append(opts, dataplane.WithOriginalDestination(orig))
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, opts...)
	return r, in.Addr().String()
}

func TestLoopbackClientsReachTheApplicationWhateverThePolicyWhenAllowed(t *testing.T) {
	// Linkerd's proxy lets the pod's own processes (loopback) through;
	// weft-proxy does the same in a pod (WithLoopbackAllowed).
	app := startHTTPApp(t)
	r, addr := loopbackInbound(t, app.port(), denyEverything(authz.ProtocolHTTP1), dataplane.WithLoopbackAllowed())
	resp, _ := rawExchange(t, addr, "GET /admin HTTP/1.1\r\nHost: web\r\n\r\n")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/admin", app.last().RequestURI)
	// The path is still normalized before it is forwarded.
	resp, _ = rawExchange(t, addr, "GET //admin/./x HTTP/1.1\r\nHost: web\r\n\r\n")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "/admin/x", app.last().RequestURI)
	r.stop(t)

	echo := startEcho(t, "")
	_, addr = loopbackInbound(t, echo.port(), denyEverything(authz.ProtocolOpaque), dataplane.WithLoopbackAllowed())
	// Bytes detection reads as opaque at once (a bare word would wait
	// for the detect timeout and be closed as undecided).
	got, err := echoOnce(t, addr, opaque("ping"))
	require.NoError(t, err)
	assert.Equal(t, opaque("ping"), got)
}

func TestLoopbackClientsAreDeniedLikeAnyoneWithoutTheOption(t *testing.T) {
	// A proxy sharing the host's loopback (the local mesh, tests) must not
	// let every local process through; nor can a client claim loopback in
	// a header.
	app := startHTTPApp(t)
	_, addr := loopbackInbound(t, app.port(), denyEverything(authz.ProtocolHTTP1))
	resp, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: web\r\nX-Forwarded-For: 127.0.0.1\r\nForwarded: for=127.0.0.1\r\n\r\n")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Zero(t, app.requests.Load())

	echo := startEcho(t, "")
	_, addr = loopbackInbound(t, echo.port(), denyEverything(authz.ProtocolOpaque))
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, _ = io.WriteString(c, opaque("ping"))
	_, err = c.Read(make([]byte, 1))
	assert.Error(t, err, "the denied connection is closed")
	assert.Zero(t, echo.accepted.Load())
}
