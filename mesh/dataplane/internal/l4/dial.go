package l4

import (
	"context"
	"net"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// connectTimeout is the dial timeout for the direction of the request or
// connection ctx belongs to: the application (inbound) or remote
// endpoints (outbound).
func (p *Paths) connectTimeout(ctx context.Context) time.Duration {
	if info := infoOf(ctx); info != nil && info.direction == Inbound && p.cfg.InboundConnectTimeout > 0 {
		return p.cfg.InboundConnectTimeout
	}
	return p.cfg.ConnectTimeout
}

// dialApp connects to the application, within the inbound connect timeout.
func (p *Paths) dialApp(ctx context.Context, addr string) (net.Conn, error) {
	d := p.dialer
	d.Timeout = p.cfg.ConnectTimeout
	if p.cfg.InboundConnectTimeout > 0 {
		d.Timeout = p.cfg.InboundConnectTimeout
	}
	return d.DialContext(ctx, "tcp", addr)
}

// dialWithin dials addr within the timeout of ctx's direction and records
// the connection among the proxy's own (dialTracked).
func (p *Paths) dialWithin(ctx context.Context, addr string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, p.connectTimeout(ctx))
	defer cancel()
	return p.dialTracked(dctx, addr)
}

// lacksRequiredIdentity reports whether an inbound connection must be
// refused because its port requires a mesh identity and the client has
// none (config.linkerd.io/proxy-require-identity-inbound-ports). The
// refusal is counted in inbound_tcp_authz_deny_total.
func (p *Paths) lacksRequiredIdentity(ic *inboundConn) bool {
	if ic.peer.Identity != "" || !p.cfg.RequireIdentityPorts.Contains(ic.port) {
		return false
	}
	l := metricstore.Target(&metricstore.Labels{}, ic.targetAddr())
	metricstore.TLSAccept(l, ic.peer, false)
	p.m.AuthzTCP(l, false)
	return true
}
