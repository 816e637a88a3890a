package meshstate

import (
	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
)

// Outbound request series are resolved once per route (route_*) and per
// endpoint of each backend (request_total, response_*), and cached on the
// service and the backend; a request finds them by the route name and the
// balancer key of the endpoint it was sent to.

// RouteSeries returns the route-level series of a route of the service:
// dst is the Service's canonical name when discovery gave one (see
// routenames.go), else the target.
func (s *Service) RouteSeries(name string) *reqmetrics.Series {
	n := s.names.Load()
	if rs, ok := n.routes.Load(name); ok && rs.Alive() {
		return rs
	}
	h := s.st.s.Metrics.HTTP
	l := (&metricstore.Labels{}).Add("direction", connmetrics.Outbound).Add("dst", n.dst).Add("rt_route", metricstore.LabelValue(name))
	egressParentLabels(l, s)
	rs := h.Series(&h.Route, l)
	n.routes.Store(name, rs, reqmetrics.MaxCacheEntries)
	return rs
}

// LocalSeries returns the endpoint-level series of requests the proxy
// answers before reaching any endpoint (no route, no endpoints, a fault,
// a redirect): the authority and no endpoint labels.
func (s *Service) LocalSeries() *reqmetrics.Series {
	if rs := s.local.Load(); rs.Alive() {
		return rs
	}
	h := s.st.s.Metrics.HTTP
	l := (&metricstore.Labels{}).Add("direction", connmetrics.Outbound)
	l.AddIf("authority", h.AuthorityLabel(s.target))
	rs := h.Series(&h.EP, l)
	s.local.Store(rs) // no tls: the request reached no endpoint
	return rs
}

// Series returns the endpoint-level series of the endpoint behind
// handle h: Linkerd's outbound endpoint labels (authority, target, TLS
// and server identity, dst_*).
func (b *backend) Series(h *balance.Handle[endpoint.Endpoint]) *reqmetrics.Series {
	s := b.svc
	key := h.Key()
	if rs, ok := b.series.Load(key); ok && rs.Alive() {
		return rs
	}
	m := s.st.s.Metrics.HTTP
	ep := h.Value()
	l := (&metricstore.Labels{}).Add("direction", connmetrics.Outbound)
	l.AddIf("authority", m.AuthorityLabel(s.target))
	metricstore.Target(l, ep.Addr)
	metricstore.TLSConnect(l, ep.Identity, false)
	metricstore.Dst(l, ep.MetricLabels)
	rs := m.Series(&m.EP, l)
	rs.TLS = reqmetrics.TLSValue(ep.Identity != "")
	b.series.Store(key, rs, reqmetrics.MaxCacheEntries)
	return rs
}
