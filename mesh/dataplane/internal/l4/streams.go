package l4

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/clienthello"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// Stream routes: when a destination's outbound policy routes whole
// connections (route.CompileStream: Gateway API TLSRoutes, served as
// ProxyProtocol.Tls, or a TCPRoute, served as ProxyProtocol.Opaque), an
// opaque connection to it follows that route instead of going to the
// destination's own endpoints:
//
//   - TLS: the proxy reads the client's ClientHello without answering it
//     (internal/clienthello: at most clienthello.Max bytes, within the
//     detect timeout), picks the route whose SNI matches best, and hands
//     every byte it read to the backend, which does the handshake with
//     the client. No route for the SNI, or no ClientHello, refuses the
//     connection.
//   - Opaque: the route takes every connection.
//
// The route's rule then picks a backend by weight: a Service (discovered
// like any destination, its endpoints balanced and dialled with mesh TLS
// when they have an identity) or the EgressNetwork's original destination.
// A Forbidden or Invalid filter on the rule or the chosen backend refuses
// the connection before any byte reaches a backend. A policy whose stream
// routes the proxy cannot read refuses every connection (fail closed).

// Reasons of tcp_refused_total for stream routes (meshstate.RefuseForbidden,
// "forbidden", counts Forbidden filters).
const (
	refuseNoRoute        = "no-route"        // no TLS route matches the ClientHello's SNI
	refuseNotTLS         = "not-tls"         // no readable ClientHello on a destination routed by SNI
	refuseInvalidBackend = "invalid-backend" // an Invalid filter, or a backend the proxy cannot connect to
	refuseUnreadable     = "unreadable-policy"
)

// outboundStream routes client by the stream routes of dest's policy, if
// it has any. prefix holds the bytes detection already read. handled is
// false when the policy has no stream routes (the caller goes on as
// before); otherwise ok says whether the connection was handed to a
// backend, in which case its end releases dest and untracks client.
func (p *Paths) outboundStream(ctx context.Context, client net.Conn, dest *meshstate.Destination, target string, prefix []byte, from netip.AddrPort, log *slog.Logger) (handled, ok bool) {
	if !p.state.HasOutboundPolicies() {
		return false, false
	}
	pol, st, err := p.state.Service(ctx, dest).StreamRoutes()
	if err != nil {
		p.m.Refuse(Outbound, refuseUnreadable)
		log.Info("outbound connection refused: its stream routes cannot be read", "err", err)
		return true, false
	}
	if st == nil {
		return false, false
	}
	replay := append([]byte(nil), prefix...)
	sni := ""
	if st.TLS {
		_ = client.SetReadDeadline(time.Now().Add(p.detectTimeout(Outbound)))
		name, read, err := clienthello.Read(io.MultiReader(bytes.NewReader(prefix), client))
		_ = client.SetReadDeadline(time.Time{})
		if err != nil {
			p.m.Refuse(Outbound, refuseNotTLS)
			log.Info("outbound connection refused: no readable TLS ClientHello for its TLS routes", "err", err)
			return true, false
		}
		sni, replay = name, read
	}
	r := st.Select(sni)
	if r == nil {
		p.m.Refuse(Outbound, refuseNoRoute)
		log.Info("outbound connection refused: no TLS route for its server name", "sni", sni)
		return true, false
	}
	rc := routeOpened(p.m, st.TLS, pol, r.Meta, from)
	if r.Refuse != "" {
		p.m.Refuse(Outbound, refuseReason(r.Refuse))
		rc.closed(routeClosedReason(r.Refuse))
		log.Info("outbound connection refused by its route", "route", r.Name, "why", r.Refuse)
		return true, false
	}
	b := r.Pick()
	if b == nil || b.Refuse != "" {
		why := "no backend with a weight"
		if b != nil {
			why = b.Refuse
		}
		p.m.Refuse(Outbound, refuseReason(why))
		rc.closed(routeClosedReason(why))
		log.Info("outbound connection refused by its route's backend", "route", r.Name, "why", why)
		return true, false
	}
	server, ep, counted, backendDest, err := p.dialStreamBackend(ctx, b, replay, log)
	if err != nil {
		rc.closed(routeClosedUnexpected)
		log.Info("outbound connection failed", "route", r.Name, "backend", b.Name, "err", err)
		return true, false
	}
	src := p.m.Opened(connmetrics.OutboundSrc(from))
	authority := b.Authority
	if authority == "" {
		authority = target
	}
	dst := p.m.Opened(connmetrics.OutboundDst(p.m.HTTP.AuthorityLabel(authority), ep))
	log.Debug("outbound connection routed", "route", r.Name, "backend", b.Name, "endpoint", ep.Addr.String(), "sni", sni)
	p.pipe(client, client, server, src, dst, func() {
		src.Closed()
		dst.Closed()
		rc.closed(routeClosedOK)
		if counted != nil {
			counted.Active.Add(-1)
		}
		if backendDest != nil {
			backendDest.Release()
		}
		dest.Release()
		p.untrack(client)
	})
	return true, true
}

// routeClosedReason is the route close counters' error label of a route
// or backend refusal.
func routeClosedReason(why string) string {
	if why == "forbidden" {
		return routeClosedForbidden
	}
	return routeClosedInvalidBackend
}

// refuseReason is the tcp_refused_total reason of a route or backend
// refusal.
func refuseReason(why string) string {
	if why == "forbidden" {
		return meshstate.RefuseForbidden
	}
	return refuseInvalidBackend
}

// dialStreamBackend connects to backend b and sends replay first. For a
// Service backend it returns the endpoint, counted among its open
// connections, and the backend's destination, which the caller uncounts
// and releases when the connection ends.
func (p *Paths) dialStreamBackend(ctx context.Context, b *route.StreamBackend, replay []byte, log *slog.Logger) (net.Conn, endpoint.Endpoint, *meshstate.Balanced, *meshstate.Destination, error) {
	if b.Forward != nil {
		ep := endpoint.Endpoint{Addr: b.Forward.Addr, Identity: b.Forward.Identity, OpaqueTransportPort: b.Forward.OpaqueTransportPort}
		c, err := p.dialEndpoint(ctx, ep, ep.Addr.String(), transport.Opaque, replay)
		return c, ep, nil, nil, err
	}
	d, err := p.state.Destinations().Get(ctx, b.Authority)
	if err != nil {
		return nil, endpoint.Endpoint{}, nil, nil, err
	}
	set := d.Set()
	var tried []*meshstate.Balanced
	for attempt := 0; attempt < maxDialAttempts; attempt++ {
		ep := set.Pick(tried)
		if ep == nil {
			break
		}
		tried = append(tried, ep)
		c, err := p.dialEndpoint(ctx, ep.Endpoint, b.Authority, transport.Opaque, replay)
		if err != nil {
			log.Info("endpoint failed", "endpoint", ep.Addr.String(), "identity", ep.Identity, "err", err)
			continue
		}
		ep.Active.Add(1)
		return c, ep.Endpoint, ep, d, nil
	}
	d.Release()
	if len(tried) == 0 {
		return nil, endpoint.Endpoint{}, nil, nil, fmt.Errorf("dataplane: %s has no endpoints", b.Authority)
	}
	return nil, endpoint.Endpoint{}, nil, nil, errors.New("dataplane: no endpoint of " + b.Authority + " reachable")
}

// Route metrics of outbound connections the proxy does not read as HTTP,
// under the names and labels of Linkerd's proxy, so that its dashboards
// and queries read them unchanged:
//
//	outbound_tcp_route_open_total{parent_*, route_*, target_ip, target_port}
//	outbound_tcp_route_close_total{..., error}
//	outbound_tls_route_open_total{parent_*, route_*, hostname}
//	outbound_tls_route_close_total{..., error}
//
// parent_* (group, kind, namespace, name, port, section_name) name the
// Service or EgressNetwork whose policy routed the connection, route_*
// (group, kind, namespace, name) the TCPRoute, TLSRoute or built-in route
// ("default", as Linkerd names a route of no resource: an opaque Service
// port, an EgressNetwork's tcp-egress-allow or tcp-egress-deny). error is
// empty for a connection that was relayed, or why the route refused it:
// forbidden (a Forbidden filter, an EgressNetwork's Deny), invalid_backend
// (an Invalid filter), unexpected (no backend the proxy could connect
// to). hostname stays empty, as in Linkerd's proxy by default. Every value
// comes from the policy controller or the connection's original
// destination, never from the client's bytes (the SNI is not a label).

// Values of the error label of the route close counters.
const (
	routeClosedOK             = ""
	routeClosedForbidden      = "forbidden"
	routeClosedInvalidBackend = "invalid_backend"
	routeClosedUnexpected     = "unexpected"
)

// routeConn is one connection counted on a TCP or TLS route; closed
// counts its end once.
type routeConn struct {
	g     *metricstore.Group
	close *metricstore.Family
}

// routeOpened counts a connection on route rt of policy pol:
// outbound_tls_route_open_total when tls, else
// outbound_tcp_route_open_total with the connection's original
// destination target.
func routeOpened(m *connmetrics.Set, tls bool, pol *outbound.OutboundPolicy, rt *meta.Metadata, target netip.AddrPort) *routeConn {
	l := &metricstore.Labels{}
	metricstore.PolicyMeta(l, "parent", pol.GetMetadata(), true)
	metricstore.PolicyMeta(l, "route", rt, false)
	open, closeF := m.TCPRouteOpen, m.TCPRouteClose
	if tls {
		open, closeF = m.TLSRouteOpen, m.TLSRouteClose
		l.Add("hostname", "")
	} else {
		ip, port := "", ""
		if target.IsValid() {
			ip, port = target.Addr().String(), strconv.Itoa(int(target.Port()))
		}
		l.Add("target_ip", ip).Add("target_port", port)
	}
	g := m.Store.Group(l)
	g.Pin()
	g.Series(open, nil).Inc()
	return &routeConn{g: g, close: closeF}
}

// closed counts the connection's end with the error label why (one of
// the routeClosed* values). A nil routeConn counts nothing.
func (r *routeConn) closed(why string) {
	if r == nil || r.g == nil {
		return
	}
	r.g.Series(r.close, (&metricstore.Labels{}).Add("error", why)).Inc()
	r.g.Touch(time.Now())
	r.g.Unpin()
	r.g = nil
}

// opaqueRouteOpened counts an opaque connection to dest on its policy's
// built-in opaque route (opaqueRouteOf); nil when the proxy has no policy
// for it or the policy no such route.
func (p *Paths) opaqueRouteOpened(ctx context.Context, dest *meshstate.Destination, target netip.AddrPort) *routeConn {
	if !p.state.HasOutboundPolicies() {
		return nil
	}
	pol := p.state.Service(ctx, dest).Policy()
	r := meshstate.OpaqueRouteOf(pol)
	if r == nil {
		return nil
	}
	return routeOpened(p.m, false, pol, r.GetMetadata(), target)
}
