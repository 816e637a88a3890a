package inbound

import (
	"net/netip"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Inbound request series are resolved once per combination of connection
// class (target, TLS, client identity), policy route, authorization and
// outcome, and cached on the port's policy snapshot: a request looks its
// series up by a small key and adds to counters.

// seriesKey identifies the series of an inbound request.
type seriesKey struct {
	target   netip.AddrPort
	tls      bool
	id       string
	prof     profRoute
	http     *authz.HTTPRoute
	grpc     *authz.GRPCRoute
	authz    *authz.Authorization
	decision authz.Decision
	deny     string // the denial class, for a denied request
}

// profRoute is the route of an inbound request at the route level: the
// Service its peer proxy named, when discovery knows it (the dst label;
// empty otherwise), and the name of that Service's profile route the
// request matched (route.DefaultName when none did).
type profRoute struct {
	dst, name string
}

// seriesEntry holds the resolved series of one seriesKey.
type seriesEntry struct {
	ep, rt  *reqmetrics.Series  // request series (admitted requests only)
	authz   *metricstore.Series // the authorization counter the request adds to
	authzG  *metricstore.Group
	checked []*metricstore.Group
}

func (e *seriesEntry) alive() bool {
	for _, g := range e.checked {
		if !g.Alive() {
			return false
		}
	}
	return true
}

// use touches the entry's groups.
func (e *seriesEntry) use(now time.Time) {
	e.authzG.Touch(now)
}

// inboundSeries returns the series of an inbound request on a port whose
// policy snapshot is st. res is the evaluation (its route and
// authorization), deny the denial class (empty when admitted), pr the
// labels of its route series; a request no route matched is counted in
// inbound_http_route_not_found_total.
func (h *HTTP) inboundSeries(st *Policy, info *Conn, res *authz.Result, deny string, pr profRoute) *seriesEntry {
	k := seriesKey{
		target: info.TargetAddr, tls: info.Peer.TLS, id: info.Peer.Identity, prof: pr,
		http: res.HTTPRoute, grpc: res.GRPCRoute, authz: res.Authorization, decision: res.Decision, deny: deny,
	}
	if e, ok := st.series.Load(k); ok && e.alive() {
		return e
	}
	e := h.buildInboundSeries(st, info, res, deny, pr)
	st.series.Store(k, e, reqmetrics.MaxCacheEntries)
	return e
}

func (h *HTTP) buildInboundSeries(st *Policy, info *Conn, res *authz.Result, deny string, pr profRoute) *seriesEntry {
	m := h.Metrics
	routeMeta, hasRoute := res.Route()
	var srv *authz.Server
	if st != nil {
		srv = st.Srv
	}

	// The policy labels shared by the authorization counters and the
	// request series: target, server, route (when one matched),
	// authorization (when one admitted), TLS.
	policy := func(withAuthz bool) *metricstore.Labels {
		l := metricstore.Target(&metricstore.Labels{}, info.TargetAddr)
		metricstore.Server(l, srv, info.Port)
		if hasRoute {
			metricstore.Meta(l, "route", routeMeta)
		}
		if withAuthz && res.Authorization != nil {
			metricstore.Meta(l, "authz", res.Authorization.Meta)
		}
		return metricstore.TLSAccept(l, info.Peer, false)
	}

	e := &seriesEntry{}
	switch {
	case deny == authz.ReasonNoRoute.String():
		e.authzG = m.Store.Group(policy(false))
		e.authz = e.authzG.Series(m.RouteNotFound, nil)
	case deny != "":
		e.authzG = m.Store.Group(policy(false))
		e.authz = e.authzG.Series(m.AuthzDeny, (&metricstore.Labels{}).Add("reason", deny))
	default:
		e.authzG = m.Store.Group(policy(true))
		f := m.AuthzAllow
		if res.Decision == authz.Audit {
			f = m.AuthzAudit
		}
		e.authz = e.authzG.Series(f, nil)

		el := (&metricstore.Labels{}).Add("direction", direction)
		pl := policy(true)
		el.Names, el.Values = append(el.Names, pl.Names...), append(el.Values, pl.Values...)
		e.ep = m.Series(&m.EP, el)
		e.ep.TLS = reqmetrics.TLSValue(info.Peer.TLS)

		// The route level is Linkerd's: the ServiceProfile route of the
		// Service the client called (HTTP.Route: internal/meshstate's
		// InboundRoute), not the policy route (which the series above
		// carry as route_*).
		rl := (&metricstore.Labels{}).Add("direction", direction)
		rl.AddIf("dst", pr.dst)
		name := pr.name
		if name == "" {
			name = route.DefaultName
		}
		rl.Add("rt_route", metricstore.LabelValue(name))
		e.rt = m.Series(&m.Route, rl)
		e.checked = append(e.checked, e.ep.Group(), e.rt.Group())
	}
	e.checked = append(e.checked, e.authzG)
	return e
}
