package dataplane_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The tap listener's slots (64) and its handshake stage, against clients
// that are not tappers: silent TCP clients and meshed clients of another
// identity. Attackers dial from their own loopback addresses (127.0.0.2,
// 127.0.0.3, ...), as they would from their own hosts; the tapper dials
// from 127.0.0.1.

// tapSlots is the tap listener's number of connection slots.
const tapSlots = 64

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports, once c's peer closed it (or the hang guard
// passed), whether the peer did.
func closedByPeer(c net.Conn) <-chan bool {
	out := make(chan bool, 1)
	go func() {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard only
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		out <- !(errors.As(err, &ne) && ne.Timeout())
	}()
	return out
}

// idleMeshedClient completes mutual TLS to the tap listener at addr with
// cert, from src, sends the HTTP/2 preface and an empty SETTINGS frame,
// and then stays idle, as a meshed workload that is not a tapper could.
// It returns the connection, or nil when the handshake did not complete.
func idleMeshedClient(t *testing.T, pk *pki, cert tls.Certificate, src, addr, serverID string) net.Conn {
	t.Helper()
	raw := dialFrom(t, src, addr)
	tc := tls.Client(raw, &tls.Config{RootCAs: testutil.Pool(pk.anchor), ServerName: serverID, MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2"}, Certificates: []tls.Certificate{cert}})
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		return nil
	}
	// The proxy may have closed it already: the client's side of a TLS
	// 1.3 handshake ends before the server has checked its certificate.
	_, _ = io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	_ = raw.SetDeadline(time.Time{})
	return tc
}

func TestTapSlotsGoToTappersNotToSilentOrOtherMeshedClients(t *testing.T) {
	// Finding 5 of issue 27: 64 silent TCP connections (10 s each,
	// renewable) or 64 idle mutual-TLS connections of any identity (5
	// minutes each) held every slot, and the tapper got no events.
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), cfgA: tapConfig})
	addr := hp.tapA.Addr().String()

	// Meshed workloads that are not tappers open 64 connections, one
	// after the other, each from its own address, each idle once its
	// HTTP/2 preface is sent.
	other := hp.pki.issuer.Leaf(t, testutil.CertOptions{Name: idC}).TLS
	var meshed []net.Conn
	for i := 0; i < tapSlots; i++ {
		c := idleMeshedClient(t, hp.pki, other, fmt.Sprintf("127.0.2.%d", i+1), addr, idA)
		require.NotNil(t, c, "meshed client %d completes its handshake", i)
		meshed = append(meshed, c)
	}
	// Then 64 silent TCP connections from another address, kept open.
	var silent []net.Conn
	for i := 0; i < tapSlots; i++ {
		silent = append(silent, dialFrom(t, "127.0.0.2", addr))
	}

	// The tapper connects after all of them and opens a tap.
	c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
	stream, err := c.Observe(ctxTimeout(t, 60*time.Second), &ptap.ObserveRequest{Limit: 1, Match: pathPrefix("/after-the-flood")})
	require.NoError(t, err, "the tapper reaches the tap server")
	testutil.Eventually(t, 20*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 1 },
		"the tapper's tap is open while the other clients keep their connections")

	resp, _ := get(t, h1Client(), hp.url("/after-the-flood"))
	require.Equal(t, 200, resp.StatusCode)
	ev, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, "/after-the-flood", ev.GetHttp().GetRequestInit().GetPath(), "the tapper gets the request's events")

	// What the others hold: nothing. Every meshed connection of another
	// identity was closed after its handshake; of the silent ones, no
	// more than the per-client handshake allowance waits.
	for i, mc := range meshed {
		assert.True(t, <-closedByPeer(mc), "meshed connection %d was closed by the proxy", i)
	}
	assert.Equal(t, float64(len(meshed)), hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="not-a-tapper"`))
	assert.Equal(t, 1.0, hp.a.metric(t, "tap_connections_open"), "only the tapper holds a slot")
	assert.LessOrEqual(t, hp.a.metric(t, "tap_handshakes_pending"), 4.0, "at most 4 handshakes wait per client address")
	assert.GreaterOrEqual(t, hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="too-many-from-client"`), float64(len(silent)-4),
		"silent connections beyond the per-client allowance were closed at once")
}

func TestASilentTapClientIsClosedAtTheHandshakeBoundAndHoldsNoSlot(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapHandshakeTimeout = 200 * time.Millisecond
	}})
	c := dialFrom(t, "127.0.0.2", hp.tapA.Addr().String())
	closed := closedByPeer(c)
	testutil.Eventually(t, 10*time.Second, func() bool {
		return hp.a.metric(t, "tap_handshakes_pending") == 1 || hp.a.metric(t, "tcp_refused_total", `direction="tap"`) > 0
	}, "the proxy took the connection into its handshake")
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_connections_open"), "a connection in its handshake holds no slot")
	assert.True(t, <-closed, "the proxy closed the silent connection")
	assert.Equal(t, 1.0, hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="tls-handshake"`))
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_handshakes_pending"))
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_connections_open"))
}

func TestTheTapHandshakeStageIsBoundedPerClientAndInAll(t *testing.T) {
	// Handshakes that stay pending for the whole test: the bound is far
	// beyond it, and the clients say nothing.
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapHandshakeTimeout = time.Minute
	}})
	addr := hp.tapA.Addr().String()
	pending := func() float64 { return hp.a.metric(t, "tap_handshakes_pending") }

	// One client address: four handshakes at once, the fifth is closed.
	for i := 0; i < 4; i++ {
		dialFrom(t, "127.0.0.2", addr)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return pending() == 4 }, "four handshakes pending")
	fifth := dialFrom(t, "127.0.0.2", addr)
	assert.True(t, <-closedByPeer(fifth), "a fifth connection from the same address is closed at once")
	assert.Equal(t, 1.0, hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="too-many-from-client"`))

	// Sixteen in all: three more addresses fill the stage, then any
	// other client is closed at once.
	for _, src := range []string{"127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		for i := 0; i < 4; i++ {
			dialFrom(t, src, addr)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return pending() == 16 }, "sixteen handshakes pending")
	extra := dialFrom(t, "127.0.0.6", addr)
	assert.True(t, <-closedByPeer(extra), "a connection beyond the stage is closed at once")
	assert.Equal(t, 1.0, hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="too-many-handshakes"`))
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_connections_open"), "none of them holds a slot")
}

// TestTapConnectionsOfAcceptedTappersShareTheSlots: a tapper's second
// connection is served beside its first; the slots count them.
func TestTapConnectionsOfAcceptedTappersShareTheSlots(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	for i := 0; i < 2; i++ {
		c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
		openTap(t, c, hp.a, &ptap.ObserveRequest{Limit: 10, Match: everything()}, float64(i+1))
	}
	assert.Equal(t, 2.0, hp.a.metric(t, "tap_connections_open"))
}
