package upstream

import (
	"context"
	"net"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// Dialer is how the pools reach the network: the proxy's dials and its
// transport metrics, given as functions so that this package needs
// neither the proxy nor its TLS. All three are required.
type Dialer struct {
	// Peer connects to a peer proxy: ep.Addr's host at
	// ep.OpaqueTransportPort, mutual TLS expecting ep.Identity, and the
	// transport header announcing proto for the application port
	// ep.Addr.Port(). It returns the TLS connection, ready for the
	// protocol. The proxy's is its dialEndpoint, bounded by its connect
	// timeout.
	Peer func(ctx context.Context, ep endpoint.Endpoint, proto transport.Protocol) (net.Conn, error)
	// Plain connects to addr ("host:port") without TLS: h2c to the
	// application or to an endpoint outside the mesh. The proxy's bounds
	// it with the connect timeout of ctx's direction.
	Plain func(ctx context.Context, addr string) (net.Conn, error)
	// Count wraps a connection just dialled so that it is counted in the
	// transport metrics with l's labels until it closes. The wrapper
	// should have a NetConn method returning c: the HTTP/1.1 pool looks
	// through it for the TLS connection when it checks an idle one.
	Count func(c net.Conn, l Labels) net.Conn
}

// Labels says how a pooled connection is labelled in the transport
// metrics when it is dialled: to the local application (Inbound), or to
// Endpoint. It is passed by value and turned into labels by
// Dialer.Count only when a connection is dialled, so that requests that
// reuse a connection build nothing.
type Labels struct {
	Inbound  bool
	Endpoint endpoint.Endpoint
}

// Settings are the pools' limits from the proxy's configuration.
type Settings struct {
	// H2 are the options of every pooled HTTP/2 connection (windows,
	// buffer limit, header size, keepalive, idle timeout, error counter).
	H2 []h2client.Option
	// IdleTimeout is the proxy's HTTP idle timeout (Config.HTTPIdleTimeout):
	// a connection to a peer proxy stays idle in the HTTP/1.1 pool for
	// half of it, at most 90 s (90 s when unset).
	IdleTimeout time.Duration
	// WaitTimeout is how long an HTTP/1.1 request waits for a pooled
	// connection (Config.HTTPPoolWaitTimeout); 0 means
	// DefaultWaitTimeout.
	WaitTimeout time.Duration
	// MaxHeaderBytes bounds a response head read from a peer over
	// HTTP/1.1 (Config.HTTPMaxHeaderBytes).
	MaxHeaderBytes int
}
