package upstream_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// share is one downstream client's share of the HTTP/1.1 pool to a peer
// endpoint (the package's peerH1ConnsPerClient, doc.go).
const share = 64

var (
	clientA = netip.MustParseAddr("10.0.0.1")
	clientB = netip.MustParseAddr("10.0.0.2")
)

// holdShare sends share requests to /hold from clientA and returns once
// the peer holds all of them; their results come on the returned channel
// once the peer releases them.
func holdShare(t *testing.T, peer *h1Peer, pool *upstream.PeerH1Pool, dl upstream.Labels) chan error {
	t.Helper()
	results := make(chan error, share)
	for i := 0; i < share; i++ {
		req := get(t, "/hold")
		go func() { results <- readOK(pool.RoundTrip(peer.key(), req, clientA, dl)) }()
	}
	for i := 0; i < share; i++ {
		require.Equal(t, "/hold", waitArrival(t, peer))
	}
	return results
}

func waitArrival(t *testing.T, peer *h1Peer) string {
	t.Helper()
	select {
	case p := <-peer.arrived:
		return p
	case <-testutil.Context(t, 0).Done():
		t.Fatal("test: no request reached the peer")
		return ""
	}
}

// A client holding its whole share of the pool leaves connections for
// another client, and its own next request is answered at the wait
// deadline with the pool's timeout error, never sent.
func TestAClientHoldingItsSharePeerPoolServesAnotherAndTimesItsNextRequestOut(t *testing.T) {
	peer := startH1Peer(t)
	d := &dials{tls: peer.client}
	const wait = 100 * time.Millisecond
	pool := upstream.NewPeerH1(d.dialer(), upstream.Settings{WaitTimeout: wait, IdleTimeout: time.Minute})
	t.Cleanup(pool.CloseAll)
	ep := endpoint.Endpoint{Addr: netip.MustParseAddrPort("10.1.0.7:8080"), Identity: peerIdentity}
	dl := upstream.Labels{Endpoint: ep}

	results := holdShare(t, peer, pool, dl)

	require.NoError(t, readOK(pool.RoundTrip(peer.key(), get(t, "/now"), clientB, dl)), "another client gets a connection of its own")
	require.Equal(t, "/now", waitArrival(t, peer))

	_, err := pool.RoundTrip(peer.key(), get(t, "/late"), clientA, dl)
	var pe *h1.PoolTimeoutError
	require.ErrorAs(t, err, &pe, "the client past its share waits, then is refused")
	assert.True(t, pe.Share, "the bound it met is its share, not the pool's")
	assert.Equal(t, share, pe.Limit)
	assert.Equal(t, peer.key().Addr.String(), pe.Addr)
	assert.Equal(t, wait, pe.Wait)
	var de *httpcore.DialError
	assert.NotErrorAs(t, err, &de, "a pool timeout is not a dial error (another endpoint is not tried)")
	select {
	case p := <-peer.arrived:
		t.Fatalf("the refused request reached the peer: %s", p)
	default:
	}

	// One connection per request held, one for the other client; each
	// dialled to the peer's proxy port with its identity, the transport
	// header announcing HTTP/1 for the key's application port, and
	// counted with the endpoint's labels.
	assert.Len(t, d.counted(), share+1)
	for _, l := range d.counted() {
		assert.Equal(t, dl, l)
	}
	for _, pd := range d.peerDials() {
		assert.Equal(t, transport.HTTP1, pd.proto)
		assert.Equal(t, peerIdentity, pd.ep.Identity)
		assert.Equal(t, peer.addr.Port(), pd.ep.OpaqueTransportPort)
		assert.Equal(t, netip.AddrPortFrom(peer.addr.Addr(), 8080), pd.ep.Addr)
	}

	close(peer.release)
	for i := 0; i < share; i++ {
		assert.NoError(t, <-results)
	}
}

// A request waiting for its client's share gets the connection one of
// that client's requests gives back: no new connection is dialled.
func TestAWaitingRequestGetsTheConnectionItsClientGivesBack(t *testing.T) {
	peer := startH1Peer(t)
	d := &dials{tls: peer.client}
	pool := upstream.NewPeerH1(d.dialer(), upstream.Settings{WaitTimeout: time.Minute, IdleTimeout: time.Minute})
	t.Cleanup(pool.CloseAll)
	dl := upstream.Labels{Endpoint: endpoint.Endpoint{Addr: netip.MustParseAddrPort("10.1.0.7:8080"), Identity: peerIdentity}}

	results := holdShare(t, peer, pool, dl)
	waiter := make(chan error, 1)
	req := get(t, "/next")
	go func() { waiter <- readOK(pool.RoundTrip(peer.key(), req, clientA, dl)) }()
	testutil.Eventually(t, 0, func() bool { return pool.Waiting() == 1 }, "the request past the share to wait")

	peer.release <- struct{}{} // one held request is answered
	require.NoError(t, <-results)
	require.Equal(t, "/next", waitArrival(t, peer))
	require.NoError(t, <-waiter)
	assert.Len(t, d.counted(), share, "the waiter was sent on a returned connection")
	assert.Equal(t, 0, pool.Waiting())

	close(peer.release)
	for i := 1; i < share; i++ {
		assert.NoError(t, <-results)
	}
}

// Sweep keeps an endpoint while a request is on its way to it, and once
// its connections have been idle past the idle timeout closes them and
// forgets the endpoint.
func TestSweepForgetsAPeerEndpointOnlyOnceItsConnectionsAreIdleAndClosed(t *testing.T) {
	peer := startH1Peer(t)
	d := &dials{tls: peer.client}
	// Half of 2 ns: every idle connection is past it.
	pool := upstream.NewPeerH1(d.dialer(), upstream.Settings{IdleTimeout: 2 * time.Nanosecond})
	t.Cleanup(pool.CloseAll)
	dl := upstream.Labels{Endpoint: endpoint.Endpoint{Addr: netip.MustParseAddrPort("10.1.0.7:8080"), Identity: peerIdentity}}

	done := make(chan error, 1)
	req := get(t, "/hold")
	go func() { done <- readOK(pool.RoundTrip(peer.key(), req, clientA, dl)) }()
	require.Equal(t, "/hold", waitArrival(t, peer))
	pool.Sweep()
	assert.Equal(t, 1, pool.EndpointsForTest(), "a request is on its way")
	assert.Zero(t, d.closed.Load())

	close(peer.release)
	require.NoError(t, <-done)
	testutil.Eventually(t, 0, func() bool {
		pool.Sweep()
		return pool.EndpointsForTest() == 0
	}, "the idle endpoint to be forgotten")
	assert.Equal(t, int32(1), d.closed.Load(), "its idle connection was closed")

	// The endpoint comes back on its next request.
	require.NoError(t, readOK(pool.RoundTrip(peer.key(), get(t, "/again"), clientA, dl)))
	assert.Equal(t, 1, pool.EndpointsForTest())
}

// After CloseAll, the pool sends nothing: a dial error, so that the
// proxy answers without waiting.
func TestAClosedPeerPoolRefusesRequests(t *testing.T) {
	peer := startH1Peer(t)
	d := &dials{tls: peer.client}
	pool := upstream.NewPeerH1(d.dialer(), upstream.Settings{})
	pool.CloseAll()
	_, err := pool.RoundTrip(peer.key(), get(t, "/now"), clientA, upstream.Labels{})
	var de *httpcore.DialError
	require.ErrorAs(t, err, &de)
	assert.EqualError(t, err, "dataplane: proxy is stopping")
	assert.Empty(t, d.peerDials())
}
