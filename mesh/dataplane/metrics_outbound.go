package dataplane

import (
	"sync/atomic"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// Outbound request series are resolved once per route (route_*) and per
// endpoint of each backend (request_total, response_*), and cached on the
// service and the backend; a request finds them by the route name and the
// balancer key of the endpoint it was sent to.

// routeSeries returns the route-level series of a route of the service:
// dst is the Service's canonical name when discovery gave one (see
// route_names.go), else the target.
func (s *service) routeSeries(name string) *reqSeries {
	n := s.names.Load()
	if rs, ok := n.routes.load(name); ok && rs.alive() {
		return rs
	}
	h := s.p.m.http
	l := (&metricstore.Labels{}).Add("direction", Outbound).Add("dst", n.dst).Add("rt_route", metricstore.LabelValue(name))
	egressParentLabels(l, s)
	rs := h.reqSeries(&h.route, l)
	n.routes.store(name, rs, maxCacheEntries)
	return rs
}

// localSeries returns the endpoint-level series of requests the proxy
// answers before reaching any endpoint (no route, no endpoints, a fault,
// a redirect): the authority and no endpoint labels.
func (s *service) localSeries() *reqSeries {
	if rs := s.local.Load(); rs.alive() {
		return rs
	}
	h := s.p.m.http
	l := (&metricstore.Labels{}).Add("direction", Outbound)
	l.AddIf("authority", h.authorityLabel(s.target))
	rs := h.reqSeries(&h.ep, l)
	s.local.Store(rs) // no tls: the request reached no endpoint
	return rs
}

// seriesFor returns the endpoint-level series of the endpoint behind
// handle h: Linkerd's outbound endpoint labels (authority, target, TLS
// and server identity, dst_*).
func (b *backend) seriesFor(s *service, h *balance.Handle[Endpoint]) *reqSeries {
	key := h.Key()
	if rs, ok := b.series.load(key); ok && rs.alive() {
		return rs
	}
	m := s.p.m.http
	ep := h.Value()
	l := (&metricstore.Labels{}).Add("direction", Outbound)
	l.AddIf("authority", m.authorityLabel(s.target))
	metricstore.Target(l, ep.Addr)
	metricstore.TLSConnect(l, ep.Identity, false)
	metricstore.Dst(l, ep.MetricLabels)
	rs := m.reqSeries(&m.ep, l)
	rs.tls = tlsValue(ep.Identity != "")
	b.series.store(key, rs, maxCacheEntries)
	return rs
}

// retryable counts a retryable response on the route (route_retryable_total),
// with skipped="no_budget" when the budget refused the retry.
func (s *reqStats) retryable(hasBudget bool) {
	if s.rt == nil {
		return
	}
	s.rt.retryable(hasBudget).Inc()
}

// retryable returns the route_retryable_total series of a route.
func (r *reqSeries) retryable(hasBudget bool) *metricstore.Series {
	p := &r.retry
	if !hasBudget {
		p = &r.retryNoBudget
	}
	if s := p.Load(); s != nil {
		return s
	}
	var extra *metricstore.Labels
	if !hasBudget {
		extra = (&metricstore.Labels{}).Add("skipped", "no_budget")
	}
	s := r.g.Series(r.fam.retryable, extra)
	p.Store(s)
	return s
}

// retrySeries are the route_retryable_total series of a route.
type retrySeries struct {
	retry, retryNoBudget atomic.Pointer[metricstore.Series]
}
