package connmetrics

import (
	"net"
	"net/netip"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Transport label sets, one per kind of connection, as Linkerd's proxy
// labels them.

// InboundSrc labels a connection the inbound proxy accepted: direction,
// peer="src", target, TLS (client_id) and server labels.
func InboundSrc(target netip.AddrPort, peer authz.Conn, srv *authz.Server, port uint16) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Inbound).Add("peer", peerSrc)
	metricstore.Target(l, target)
	metricstore.TLSAccept(l, peer, false)
	return metricstore.Server(l, srv, port)
}

// App labels a connection the inbound proxy opened to the local
// application.
func App() *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Inbound).Add("peer", peerDst)
	return metricstore.TLSConnect(l, "", true)
}

// OutboundSrc labels a connection the outbound proxy accepted from the
// application; target is its original destination when known.
func OutboundSrc(target netip.AddrPort) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Outbound).Add("peer", peerSrc)
	metricstore.Target(l, target)
	return metricstore.TLSAccept(l, authz.Conn{}, true)
}

// OutboundDst labels a connection the outbound proxy opened to an
// endpoint: the logical authority (when it is a name), the endpoint's
// address, its identity and its discovery labels (dst_*).
func OutboundDst(authority string, ep endpoint.Endpoint) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Outbound).Add("peer", peerDst)
	l.AddIf("authority", authority)
	metricstore.Target(l, ep.Addr)
	metricstore.TLSConnect(l, ep.Identity, false)
	return metricstore.Dst(l, ep.MetricLabels)
}

// Counted counts the bytes of a connection in the transport metrics
// (tcp_read_bytes_total, tcp_write_bytes_total). Its owner records the
// connection's end (Conn.Closed).
type Counted struct {
	net.Conn
	ReadBytes, WrittenBytes *metricstore.Series
}

func (c *Counted) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.ReadBytes.AddN(uint64(n))
	}
	return n, err
}

// NetConn returns the connection Counted wraps.
func (c *Counted) NetConn() net.Conn { return c.Conn }

func (c *Counted) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.WrittenBytes.AddN(uint64(n))
	}
	return n, err
}

// Dialed is a connection the proxy opened, counted in the transport
// metrics until it is closed: its bytes, the first error of a read or
// write that is not a use of the closed connection (the errno label),
// and its end when Close is called.
type Dialed struct {
	Counted
	stats *Conn
}

// Dial wraps a connection the proxy dialled, counted with labels l
// (App, OutboundDst).
func (m *Set) Dial(c net.Conn, l *metricstore.Labels) net.Conn {
	s := m.Opened(l)
	return &Dialed{Counted: Counted{Conn: c, ReadBytes: s.ReadBytes, WrittenBytes: s.WrittenBytes}, stats: s}
}

func (c *Dialed) Read(b []byte) (int, error) {
	n, err := c.Counted.Read(b)
	if err != nil && !relay.IsClosedErr(err) {
		c.stats.Fail(err)
	}
	return n, err
}

func (c *Dialed) Write(b []byte) (int, error) {
	n, err := c.Counted.Write(b)
	if err != nil && !relay.IsClosedErr(err) {
		c.stats.Fail(err)
	}
	return n, err
}

// Close closes the connection and counts its end (once).
func (c *Dialed) Close() error {
	err := c.Conn.Close()
	c.stats.Closed()
	return err
}

// NetConn returns the wrapped connection.
func (c *Dialed) NetConn() net.Conn { return c.Conn }
