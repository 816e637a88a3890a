package dataplane

import (
	"net"
	"net/netip"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Transport label sets, one per kind of connection, as Linkerd's proxy
// labels them.

// inboundSrcLabels labels a connection the inbound proxy accepted:
// direction, peer="src", target, TLS (client_id) and server labels.
func inboundSrcLabels(target netip.AddrPort, peer authz.Conn, srv *authz.Server, port uint16) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Inbound).Add("peer", peerSrc)
	metricstore.Target(l, target)
	metricstore.TLSAccept(l, peer, false)
	return metricstore.Server(l, srv, port)
}

// appLabels labels a connection the inbound proxy opened to the local
// application.
func appLabels() *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Inbound).Add("peer", peerDst)
	return metricstore.TLSConnect(l, "", true)
}

// outboundSrcLabels labels a connection the outbound proxy accepted from
// the application; target is its original destination when known.
func outboundSrcLabels(target netip.AddrPort) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Outbound).Add("peer", peerSrc)
	metricstore.Target(l, target)
	return metricstore.TLSAccept(l, authz.Conn{}, true)
}

// outboundDstLabels labels a connection the outbound proxy opened to an
// endpoint: the logical authority (when it is a name), the endpoint's
// address, its identity and its discovery labels (dst_*).
func outboundDstLabels(authority string, ep Endpoint) *metricstore.Labels {
	l := (&metricstore.Labels{}).Add("direction", Outbound).Add("peer", peerDst)
	l.AddIf("authority", authority)
	metricstore.Target(l, ep.Addr)
	metricstore.TLSConnect(l, ep.Identity, false)
	return metricstore.Dst(l, ep.MetricLabels)
}

// statsConn is a connection the proxy opened, counted in the transport
// metrics until it is closed.
type statsConn struct {
	countedConn
	stats *connStats
}

// countedDial wraps a connection the proxy dialled with labels l.
func (p *Proxy) countedDial(c net.Conn, l *metricstore.Labels) net.Conn {
	s := p.m.opened(l)
	return &statsConn{countedConn: countedConn{Conn: c, read: s.read, wrt: s.wrt}, stats: s}
}

func (c *statsConn) Read(b []byte) (int, error) {
	n, err := c.countedConn.Read(b)
	if err != nil && !relay.IsClosedErr(err) {
		c.stats.Fail(err)
	}
	return n, err
}

func (c *statsConn) Write(b []byte) (int, error) {
	n, err := c.countedConn.Write(b)
	if err != nil && !relay.IsClosedErr(err) {
		c.stats.Fail(err)
	}
	return n, err
}

func (c *statsConn) Close() error {
	err := c.Conn.Close()
	c.stats.closed()
	return err
}

// NetConn returns the wrapped connection.
func (c *statsConn) NetConn() net.Conn { return c.Conn }
