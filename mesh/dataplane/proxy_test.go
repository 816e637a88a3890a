package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// opaquePayload is application bytes detection classifies as opaque (not
// HTTP), for the layer-4 tests.
const opaquePayload = "\x00\x01opaque-payload\r\n"

func TestTCPFlowsThroughBothProxiesOverMutualTLS(t *testing.T) {
	pr := startPair(t, pairOptions{})
	const secret = "\x00weft-component-secret-payload"
	got, err := echoOnce(t, pr.clientAddr, secret)
	require.NoError(t, err)
	assert.Equal(t, secret, got)

	wire := pr.tap.bytes()
	require.NotEmpty(t, wire)
	assert.Equal(t, byte(0x16), wire[0], "the hop between proxies starts with a TLS handshake record")
	assert.NotContains(t, string(wire), secret, "the payload never crosses between proxies in the clear")
	assert.NotContains(t, string(wire), "WEFT", "the transport header travels inside TLS")

	testutil.Eventually(t, 5*time.Second, func() bool {
		return pr.b.metric(t, "tcp_close_total", `direction="inbound"`, `peer="src"`, `client_id="`+idA+`"`, `tls="true"`) == 1
	}, "server proxy records the client identity")
	assert.Equal(t, 1.0, pr.b.metric(t, "inbound_tcp_authz_allow_total", `client_id="`+idA+`"`,
		`authz_kind="serverauthorization"`, `authz_name="allow-client"`, fmt.Sprintf(`target_port="%d"`, pr.app.port())))
	assert.Equal(t, float64(len(secret)), pr.b.metric(t, "tcp_read_bytes_total", `direction="inbound"`, `peer="src"`, `client_id="`+idA+`"`))
	assert.Equal(t, float64(len(secret)), pr.b.metric(t, "tcp_write_bytes_total", `direction="inbound"`, `peer="src"`, `client_id="`+idA+`"`))
	assert.Equal(t, float64(len(secret)), pr.b.metric(t, "tcp_write_bytes_total", `direction="inbound"`, `peer="dst"`, `no_tls_reason="loopback"`),
		"the connection to the application is counted too")
	testutil.Eventually(t, 5*time.Second, func() bool {
		return pr.a.metric(t, "tcp_close_total", `direction="outbound"`, `peer="dst"`, `server_id="`+idB+`"`, `tls="true"`) == 1
	}, "client proxy records the server identity")
	assert.Equal(t, 1.0, pr.a.metric(t, "tcp_open_total", `direction="outbound"`, `peer="dst"`, `server_id="`+idB+`"`))
	assert.Equal(t, 0.0, pr.a.metric(t, "tcp_open_connections", `direction="outbound"`, `peer="dst"`, `server_id="`+idB+`"`))
	assert.Equal(t, 1.0, pr.a.metric(t, "tcp_connection_duration_ms_count", `direction="outbound"`, `peer="dst"`, `classification="success"`))
	assert.Greater(t, pr.a.metric(t, "identity_cert_expiration_timestamp_seconds"), float64(time.Now().Unix()))
}

func TestLargeTransfersAndHalfCloseSurviveTheProxies(t *testing.T) {
	pr := startPair(t, pairOptions{})
	c, err := net.DialTimeout("tcp", pr.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	payload := make([]byte, 4<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	go func() {
		c.Write(payload)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	require.NoError(t, err, "the echo ends with EOF after the client's half close")
	assert.True(t, len(got) == len(payload) && string(got) == string(payload), "4 MiB echoed intact (got %d bytes)", len(got))
}

func TestOutboundRefusesAServerPresentingAnotherIdentity(t *testing.T) {
	pr := startPair(t, pairOptions{endpointID: idC})
	_, err := echoOnce(t, pr.clientAddr, opaque("hello"))
	assert.Error(t, err, "the connection fails when the server is not the identity discovery announced")
	assert.Equal(t, int32(0), pr.app.accepted.Load(), "nothing reached the application")
	assert.Equal(t, -1.0, pr.a.metric(t, "tcp_open_total", `direction="outbound"`))
}

func TestInboundDeniesAClientIdentityThePolicyDoesNotAllow(t *testing.T) {
	pr := startPair(t, pairOptions{serverPolicy: allowOnly(idC)})
	_, err := echoOnce(t, pr.clientAddr, opaque("hello"))
	assert.Error(t, err, "the denied connection is closed")
	assert.Equal(t, int32(0), pr.app.accepted.Load())
	testutil.Eventually(t, 5*time.Second, func() bool {
		return pr.b.metric(t, "inbound_tcp_authz_deny_total", `client_id="`+idA+`"`, `tls="true"`) == 1
	}, "the denial is counted with the client identity")
}

func TestPolicyChangesApplyToNewConnections(t *testing.T) {
	pr := startPair(t, pairOptions{})
	_, err := echoOnce(t, pr.clientAddr, opaque("one"))
	require.NoError(t, err)
	pr.policies.Set(uint32(pr.app.port()), defaultServer(t, dataplane.DenyAll))
	testutil.Eventually(t, 5*time.Second, func() bool {
		_, err := echoOnce(t, pr.clientAddr, opaque("two"))
		return err != nil
	}, "a deny policy takes effect")
}

// plaintextServer is a server proxy whose inbound listener pretends every
// connection was redirected to the app's port (as iptables would).
func plaintextServer(t *testing.T, policy string) (*echoApp, *running, string) {
	pk := newPKI(t)
	app := startEcho(t, "")
	pols := dataplane.NewMemoryPolicies()
	pols.Set(uint32(app.port()), defaultServer(t, policy))
	in := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), nil
	}
	r := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: in}, dataplane.WithOriginalDestination(orig))
	return app, r, in.Addr().String()
}

func TestPlaintextClientsAreAllowedOnlyWhenThePolicyAllowsUnauthenticated(t *testing.T) {
	t.Run("all-unauthenticated", func(t *testing.T) {
		app, r, addr := plaintextServer(t, dataplane.AllUnauthenticated)
		got, err := echoOnce(t, addr, opaquePayload)
		require.NoError(t, err)
		assert.Equal(t, opaquePayload, got)
		assert.Equal(t, int32(1), app.accepted.Load())
		testutil.Eventually(t, 5*time.Second, func() bool {
			return r.metric(t, "inbound_tcp_authz_allow_total", `tls="no_identity"`, `no_tls_reason="no_tls_from_remote"`) == 1
		}, "allowed plaintext is counted without identity")
	})
	t.Run("all-authenticated", func(t *testing.T) {
		app, r, addr := plaintextServer(t, dataplane.AllAuthenticated)
		_, err := echoOnce(t, addr, opaquePayload)
		assert.Error(t, err)
		assert.Equal(t, int32(0), app.accepted.Load())
		testutil.Eventually(t, 5*time.Second, func() bool {
			return r.metric(t, "inbound_tcp_authz_deny_total", `tls="no_identity"`) == 1
		}, "denied plaintext is counted")
	})
}

func TestDirectPlaintextToTheInboundPortIsRefused(t *testing.T) {
	pk := newPKI(t)
	app := startEcho(t, "")
	in := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: in})
	_, err := echoOnce(t, in.Addr().String(), opaque("hello"))
	assert.Error(t, err, "without a redirect or a transport header there is no target")
	assert.Equal(t, int32(0), app.accepted.Load())
}

func TestServerSpeaksFirstProtocolsNeedAnOpaqueDestination(t *testing.T) {
	// A client silent until the detect timeout is closed, never dialled
	// upstream; a server-speaks-first protocol works once discovery marks
	// the destination opaque (TestOpaqueDestinationsSkipDetection).
	pr := startPair(t, pairOptions{banner: "220 smtp ready\r\n", cfgA: func(c *dataplane.Config) { c.DetectTimeout = 300 * time.Millisecond }})
	c, err := net.DialTimeout("tcp", pr.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the proxy closed the silent connection")
	assert.Zero(t, pr.app.accepted.Load(), "no endpoint was dialled")
	assert.Equal(t, float64(1), pr.a.metric(t, "tcp_refused_total", `direction="outbound"`, `reason="silent"`))
}

func TestOpaqueDestinationsSkipDetection(t *testing.T) {
	pr := startPair(t, pairOptions{banner: "220 smtp ready\r\n", cfgA: func(c *dataplane.Config) { c.DetectTimeout = 5 * time.Second }})
	eps := []dataplane.Endpoint{{
		Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), pr.app.port()), Identity: idB,
		OpaqueTransportPort: pr.tap.port(), Protocol: dataplane.HintOpaque,
	}}
	// Set before the first connection, which starts the proxy's watch:
	// the watch's first set is this one.
	pr.resolver.Set(pr.target, eps...)
	c, err := net.DialTimeout("tcp", pr.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, len("220 smtp ready\r\n"))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err, "the banner arrives well before the 5s detect timeout")
}

func TestTransparentOutboundResolvesTheOriginalDestinationOrPassesItThrough(t *testing.T) {
	pk := newPKI(t)
	app := startEcho(t, "")
	appAddr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port())
	res := dataplane.NewMemoryResolver()
	out := testutil.Listen(t)
	var current atomic.Value
	orig := func(net.Conn) (netip.AddrPort, error) { return current.Load().(netip.AddrPort), nil }
	a := startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Outbound: out}, dataplane.WithOriginalDestination(orig))

	// Unknown to discovery: forwarded unchanged to the original destination.
	current.Store(appAddr)
	got, err := echoOnce(t, out.Addr().String(), opaque("passthrough"))
	require.NoError(t, err)
	assert.Equal(t, opaque("passthrough"), got)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return a.metric(t, "tcp_close_total", `direction="outbound"`, `peer="dst"`, `tls="no_identity"`, `no_tls_reason="not_provided_by_service_discovery"`) == 1
	}, "passthrough is plaintext without identity")

	// Known service IP: balanced to the plaintext endpoint discovery gives.
	target := netip.MustParseAddrPort("10.96.0.10:80")
	current.Store(target)
	res.Set(target.String(), dataplane.Endpoint{Addr: appAddr})
	got, err = echoOnce(t, out.Addr().String(), opaque("resolved"))
	require.NoError(t, err)
	assert.Equal(t, opaque("resolved"), got)

	// A service with no endpoints fails, once the empty set has reached
	// the proxy.
	res.Set(target.String())
	testutil.Eventually(t, 10*time.Second, func() bool {
		_, err := echoOnce(t, out.Addr().String(), opaque("none"))
		return err != nil
	}, "a connection to a service without endpoints fails")
}

func TestOutboundRefusesConnectionsThatWereNotRedirected(t *testing.T) {
	pk := newPKI(t)
	out := testutil.Listen(t)
	orig := func(net.Conn) (netip.AddrPort, error) { return netip.AddrPort{}, errors.New("not redirected") }
	startProxy(t, testConfig(), pk.identity(t, idA), dataplane.NewMemoryResolver(), nil, dataplane.Listeners{Outbound: out}, dataplane.WithOriginalDestination(orig))
	_, err := echoOnce(t, out.Addr().String(), opaque("x"))
	assert.Error(t, err)
}

func TestConnectionsAreBalancedAcrossEndpoints(t *testing.T) {
	pk := newPKI(t)
	apps := []*echoApp{startEcho(t, ""), startEcho(t, ""), startEcho(t, "")}
	res := dataplane.NewMemoryResolver()
	var eps []dataplane.Endpoint
	for _, a := range apps {
		eps = append(eps, dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), a.port())})
	}
	res.Set("svc:80", eps...)
	mapped := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: "svc:80"}}})
	var conns []net.Conn
	for i := 0; i < 30; i++ {
		c, err := net.DialTimeout("tcp", mapped.Addr().String(), 2*time.Second)
		require.NoError(t, err)
		conns = append(conns, c)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = io.WriteString(c, opaquePayload)
		require.NoError(t, err)
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		require.NoError(t, err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i, a := range apps {
		assert.GreaterOrEqual(t, a.accepted.Load(), int32(6), "endpoint %d got a fair share of 30 held connections", i)
	}
}

func TestUnreachableEndpointsAreSkipped(t *testing.T) {
	pk := newPKI(t)
	app := startEcho(t, "")
	dead := testutil.Listen(t)
	deadAddr := dead.Addr().(*net.TCPAddr).AddrPort()
	dead.Close()
	res := dataplane.NewMemoryResolver()
	res.Set("svc:80",
		dataplane.Endpoint{Addr: deadAddr, Weight: 1000},
		dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), Weight: 1})
	mapped := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: "svc:80"}}})
	for i := 0; i < 5; i++ {
		got, err := echoOnce(t, mapped.Addr().String(), opaquePayload)
		require.NoError(t, err)
		assert.Equal(t, opaquePayload, got)
	}
}

func TestHTTPConnectTunnelsToTheAuthority(t *testing.T) {
	pk := newPKI(t)
	app := startEcho(t, "")
	res := dataplane.NewMemoryResolver()
	res.Set("web.shop.svc.cluster.local:8080", dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port())})
	ln := testutil.Listen(t)
	startProxy(t, testConfig(), pk.identity(t, idA), res, nil, dataplane.Listeners{Connect: ln})

	c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(c, "CONNECT web.shop.svc.cluster.local:8080 HTTP/1.1\r\nHost: web.shop.svc.cluster.local:8080\r\n\r\n")
	require.NoError(t, err)
	head := make([]byte, len("HTTP/1.1 200 Connection established\r\n\r\n"))
	_, err = io.ReadFull(c, head)
	require.NoError(t, err)
	assert.Equal(t, "HTTP/1.1 200 Connection established\r\n\r\n", string(head))
	_, err = io.WriteString(c, opaque("tunnelled"))
	require.NoError(t, err)
	buf := make([]byte, len(opaque("tunnelled")))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, opaque("tunnelled"), string(buf))

	for req, want := range map[string]string{
		"CONNECT unknown.example:80 HTTP/1.1\r\nHost: unknown.example:80\r\n\r\n": "HTTP/1.1 502",
		"GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n":                               "HTTP/1.1 405",
		"NOT HTTP AT ALL\r\n\r\n":                                                 "HTTP/1.1 400",
	} {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
		require.NoError(t, err)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		resp, _ := io.ReadAll(c)
		c.Close()
		assert.True(t, strings.HasPrefix(string(resp), want), "%q answered %q", req, resp)
	}
}

func TestDestinationsKeepTheirLastEndpointsWhenTheWatchBreaks(t *testing.T) {
	pr := startPair(t, pairOptions{})
	_, err := echoOnce(t, pr.clientAddr, opaque("before"))
	require.NoError(t, err)
	pr.resolver.Break(pr.target)
	got, err := echoOnce(t, pr.clientAddr, opaque("after"))
	require.NoError(t, err, "the last known endpoints keep serving")
	assert.Equal(t, opaque("after"), got)
	testutil.Eventually(t, 5*time.Second, func() bool { return pr.resolver.Watchers(pr.target) == 1 }, "the proxy watches again")
}

// failingResolver stands for a control plane that cannot be reached.
type failingResolver struct{}

func (failingResolver) Resolve(context.Context, string) (<-chan []dataplane.Endpoint, error) {
	return nil, errors.New("connection refused")
}

type blockingResolver struct{}

func (blockingResolver) Resolve(ctx context.Context, _ string) (<-chan []dataplane.Endpoint, error) {
	return closedWhenDone(ctx, make(chan []dataplane.Endpoint)), nil
}

// closedWhenDone closes ch when ctx ends, as the Resolver and
// InboundPolicies contracts require of a source that never answers.
func closedWhenDone[T any](ctx context.Context, ch chan T) <-chan T {
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

func TestNewLookupsFailFastWhenDiscoveryIsDownOrSilent(t *testing.T) {
	for name, res := range map[string]dataplane.Resolver{"unreachable": failingResolver{}, "silent": blockingResolver{}} {
		t.Run(name, func(t *testing.T) {
			pk := newPKI(t)
			mapped := testutil.Listen(t)
			cfg := testConfig()
			cfg.ResolveTimeout = 200 * time.Millisecond
			startProxy(t, cfg, pk.identity(t, idA), res, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: "svc:80"}}})
			start := time.Now()
			_, err := echoOnce(t, mapped.Addr().String(), opaque("x"))
			assert.Error(t, err)
			assert.Less(t, time.Since(start), 2*time.Second)
		})
	}
}

func TestInboundKeepsTheLastPolicyWhenTheWatchBreaks(t *testing.T) {
	pr := startPair(t, pairOptions{})
	_, err := echoOnce(t, pr.clientAddr, opaque("before"))
	require.NoError(t, err)
	pr.policies.Break(uint32(pr.app.port()))
	got, err := echoOnce(t, pr.clientAddr, opaque("after"))
	require.NoError(t, err)
	assert.Equal(t, opaque("after"), got)
}

// blockingPolicies is a policy source that never answers.
type blockingPolicies struct{}

func (blockingPolicies) Watch(ctx context.Context, _ uint32) (<-chan *inbound.Server, error) {
	return closedWhenDone(ctx, make(chan *inbound.Server)), nil
}

func TestPortsWithoutPolicyAreRefusedAfterThePolicyTimeout(t *testing.T) {
	pk := newPKI(t)
	app := startEcho(t, "")
	in := testutil.Listen(t)
	cfg := testConfig()
	cfg.PolicyTimeout = 200 * time.Millisecond
	orig := func(net.Conn) (netip.AddrPort, error) {
		return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port()), nil
	}
	r := startProxy(t, cfg, pk.identity(t, idB), nil, blockingPolicies{}, dataplane.Listeners{Inbound: in}, dataplane.WithOriginalDestination(orig))
	_, err := echoOnce(t, in.Addr().String(), "GET / HTTP/1.1\r\n\r\n")
	assert.Error(t, err, "fail closed without a policy")
	assert.Equal(t, int32(0), app.accepted.Load())
	testutil.Eventually(t, 5*time.Second, func() bool {
		return r.metric(t, "inbound_tcp_authz_deny_total") == 1
	}, "counted as a denial")
}
