package upstream

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// A request counts from the moment it takes its endpoint's entry, before
// its client has opened (or even reserved) a connection: a sweep in that
// window keeps the entry, so that the request does not dial in a client
// the pool forgot (and CloseAll would never close).
func TestSweepKeepsAnEndpointWhoseRequestHasNotReservedAConnectionYet(t *testing.T) {
	refuse := func(context.Context, endpoint.Endpoint, transport.Protocol) (net.Conn, error) {
		return nil, errors.New("test: not dialled")
	}
	pp := NewPeerH1(Dialer{Peer: refuse}, Settings{IdleTimeout: 2})
	key := Key{Addr: netip.MustParseAddrPort("127.0.0.1:4143"), Identity: "web", Port: 8080}
	e, err := pp.entry(key, Labels{})
	require.NoError(t, err)
	require.Zero(t, e.cl.Open(e.addr), "nothing reserved yet")
	pp.Sweep()
	assert.Len(t, pp.m, 1, "the request on its way keeps its entry")
	e.inflight.Add(-1) // as RoundTrip does when the request ends
	pp.Sweep()
	assert.Empty(t, pp.m)
}
