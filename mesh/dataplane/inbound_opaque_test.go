package dataplane_test

import (
	"io"
	"net"
	"net/netip"
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

// opaqueOnly is a Server declaring its port opaque (proxyProtocol: opaque)
// that admits only ids over mesh TLS.
func opaqueOnly(ids ...string) *inbound.Server {
	s := allowOnly(ids...)
	s.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}}
	return s
}

// redirectedTo starts an inbound proxy for identity idB whose every
// connection was redirected from to (as weft-init's rules do).
func redirectedTo(t *testing.T, pk *pki, cfg dataplane.Config, pols dataplane.InboundPolicies, to netip.AddrPort) (*running, net.Listener) {
	t.Helper()
	in := testutil.Listen(t)
	r := startProxy(t, cfg, pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in},
		dataplane.WithOriginalDestination(func(net.Conn) (netip.AddrPort, error) { return to, nil }))
	return r, in
}

func TestAnOpaquePortVerifiesTheMeshIdentityOfAClientThatDialledItDirectly(t *testing.T) {
	// Found on a real node (test/cluster): a Server with proxyProtocol
	// opaque, an AuthorizationPolicy admitting the client's identity, and
	// the client's proxy (whose discovery does not know the port is
	// opaque) dialling the port itself with mesh TLS. The inbound proxy
	// skipped mesh TLS on opaque ports, saw an anonymous client and
	// refused it.
	pk := newPKI(t)
	app := startEcho(t, "")
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), opaqueOnly(idA))
	r, in := redirectedTo(t, pk, testConfig(), pols, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()))

	client := pk.issuer.Leaf(t, testutil.CertOptions{Name: idA})
	c := dialTransport(t, in.Addr().String(), idB, rootsOf(pk), &client.TLS, app.port(), transport.Opaque)
	require.NotNil(t, c, "mesh TLS to the opaque port's proxy")
	_, err := io.WriteString(c, "admitted")
	require.NoError(t, err)
	buf := make([]byte, len("admitted"))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err, "the admitted client's bytes reach the application and back")
	assert.Equal(t, "admitted", string(buf))
	assert.Equal(t, float64(1), r.metric(t, "inbound_tcp_authz_allow_total", `client_id="`+idA+`"`, `tls="true"`))

	// Another identity is still refused there.
	other := pk.issuer.Leaf(t, testutil.CertOptions{Name: idC})
	c = dialTransport(t, in.Addr().String(), idB, rootsOf(pk), &other.TLS, app.port(), transport.Opaque)
	if c != nil {
		_, _ = io.WriteString(c, "refused")
		_, err = c.Read(make([]byte, 1))
		assert.Error(t, err, "the connection of an identity the Server does not admit is closed")
	}
	assert.Equal(t, float64(1), r.metric(t, "inbound_tcp_authz_deny_total", `client_id="`+idC+`"`, `tls="true"`))
	assert.Equal(t, int32(1), app.accepted.Load(), "only the admitted client reached the application")
}

func TestAnOpaquePortStillServesAServerThatSpeaksFirstToAnUnmeshedClient(t *testing.T) {
	// Looking for mesh TLS on an opaque port waits for the client's first
	// bytes; a client of a server-speaks-first protocol sends none, and is
	// forwarded at the detect timeout (not refused as on a detect port).
	pk := newPKI(t)
	app := startEcho(t, "220 smtp ready\r\n")
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), authz.ToProto(&authz.Server{
		Meta: authz.Meta{Kind: "Server", Name: "smtp"}, Protocol: authz.ProtocolOpaque,
		Authorizations: []authz.Authorization{anyone},
	}))
	cfg := testConfig()
	cfg.DetectTimeout = 300 * time.Millisecond
	_, in := redirectedTo(t, pk, cfg, pols, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()))

	c, err := net.DialTimeout("tcp", in.Addr().String(), 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, len("220 smtp ready\r\n"))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err, "the banner reaches the silent client")
	assert.Equal(t, "220 smtp ready\r\n", string(buf))

	// A plaintext client's first bytes are forwarded as they are.
	got, err := echoOnce(t, in.Addr().String(), "GET / HTTP/1.1\r\n\r\n")
	require.NoError(t, err)
	assert.Equal(t, "220 smtp ready\r\n", got[:len("220 smtp ready\r\n")])
}
