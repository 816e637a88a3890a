package dataplane

import (
	"context"
	"net/netip"
	"strconv"
	"time"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

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
func (m *metrics) routeOpened(tls bool, pol *outbound.OutboundPolicy, rt *meta.Metadata, target netip.AddrPort) *routeConn {
	l := &metricstore.Labels{}
	policyMetaLabels(l, "parent", pol.GetMetadata(), true)
	policyMetaLabels(l, "route", rt, false)
	open, closeF := m.tcpRouteOpen, m.tcpRouteClose
	if tls {
		open, closeF = m.tlsRouteOpen, m.tlsRouteClose
		l.Add("hostname", "")
	} else {
		ip, port := "", ""
		if target.IsValid() {
			ip, port = target.Addr().String(), strconv.Itoa(int(target.Port()))
		}
		l.Add("target_ip", ip).Add("target_port", port)
	}
	g := m.st.Group(l)
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

// policyMetaLabels adds PREFIX_group, PREFIX_kind, PREFIX_namespace and
// PREFIX_name of m, and with service PREFIX_port and PREFIX_section_name,
// as Linkerd's proxy spells them: metadata of no resource is kind
// "default" with its name and the other labels empty, a port of 0 is
// empty.
func policyMetaLabels(l *metricstore.Labels, prefix string, m *meta.Metadata, service bool) {
	group, kind, ns, name, section, port := "", "default", "", m.GetDefault(), "", ""
	if r := m.GetResource(); r != nil {
		group, kind, ns, name, section = r.GetGroup(), r.GetKind(), r.GetNamespace(), r.GetName(), r.GetSection()
		if r.GetPort() != 0 {
			port = strconv.FormatUint(uint64(r.GetPort()), 10)
		}
	}
	l.Add(prefix+"_group", metricstore.LabelValue(group)).Add(prefix+"_kind", metricstore.LabelValue(kind)).
		Add(prefix+"_namespace", metricstore.LabelValue(ns)).Add(prefix+"_name", metricstore.LabelValue(name))
	if service {
		l.Add(prefix+"_port", port).Add(prefix+"_section_name", metricstore.LabelValue(section))
	}
}

// opaqueRouteOf returns the route an opaque connection follows when no
// TCPRoute or TLSRoute takes it: the first route of the policy's Opaque
// protocol, or of Detect's opaque fallback (the route Linkerd's proxy
// uses for a connection that is not HTTP). nil when the policy has none.
func opaqueRouteOf(pol *outbound.OutboundPolicy) *outbound.OpaqueRoute {
	routes := pol.GetProtocol().GetOpaque().GetRoutes()
	if det := pol.GetProtocol().GetDetect(); det != nil {
		routes = det.GetOpaque().GetRoutes()
	}
	if len(routes) == 0 {
		return nil
	}
	return routes[0]
}

// opaqueRouteOpened counts an opaque connection to dest on its policy's
// built-in opaque route (opaqueRouteOf); nil when the proxy has no policy
// for it or the policy no such route.
func (p *Proxy) opaqueRouteOpened(ctx context.Context, dest *destination, target netip.AddrPort) *routeConn {
	if p.outPolicies == nil {
		return nil
	}
	pol := p.serviceFor(ctx, dest).policy()
	r := opaqueRouteOf(pol)
	if r == nil {
		return nil
	}
	return p.m.routeOpened(false, pol, r.GetMetadata(), target)
}
