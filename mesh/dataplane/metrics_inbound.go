package dataplane

import (
	"net/netip"
	"time"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Inbound request series are resolved once per combination of connection
// class (target, TLS, client identity), policy route, authorization and
// outcome, and cached on the port's policy snapshot: a request looks its
// series up by a small key and adds to counters.

// inboundKey identifies the series of an inbound request.
type inboundKey struct {
	target   netip.AddrPort
	tls      bool
	id       string
	dst      string
	http     *authz.HTTPRoute
	grpc     *authz.GRPCRoute
	authz    *authz.Authorization
	decision authz.Decision
	deny     string // the denial class, for a denied request
}

// inboundEntry holds the resolved series of one inboundKey.
type inboundEntry struct {
	ep, rt  *reqSeries // request series (admitted requests only)
	authz   *series    // the authorization counter the request adds to
	authzG  *group
	checked []*group
}

func (e *inboundEntry) alive() bool {
	for _, g := range e.checked {
		if !g.alive() {
			return false
		}
	}
	return true
}

// use touches the entry's groups.
func (e *inboundEntry) use(now time.Time) {
	e.authzG.touch(now)
}

// inboundSeries returns the series of an inbound request on a port whose
// policy snapshot is st. res is the evaluation (its route and
// authorization), deny the denial class (empty when admitted); a request
// no route matched is counted in inbound_http_route_not_found_total.
func (p *Proxy) inboundSeries(st *portState, info *connInfo, res *authz.Result, deny string) *inboundEntry {
	k := inboundKey{
		target: info.targetAddr, tls: info.peer.TLS, id: info.peer.Identity, dst: info.dstName,
		http: res.HTTPRoute, grpc: res.GRPCRoute, authz: res.Authorization, decision: res.Decision, deny: deny,
	}
	if e, ok := st.series.load(k); ok && e.alive() {
		return e
	}
	e := p.buildInboundSeries(st, info, res, deny)
	st.series.store(k, e, maxCacheEntries)
	return e
}

func (p *Proxy) buildInboundSeries(st *portState, info *connInfo, res *authz.Result, deny string) *inboundEntry {
	h := p.m.http
	routeMeta, hasRoute := res.Route()
	var srv *authz.Server
	if st != nil {
		srv = st.srv
	}

	// The policy labels shared by the authorization counters and the
	// request series: target, server, route (when one matched),
	// authorization (when one admitted), TLS.
	policy := func(withAuthz bool) *labels {
		l := targetLabels(&labels{}, info.targetAddr)
		srvLabels(l, srv, info.port)
		if hasRoute {
			metaLabels(l, "route", routeMeta)
		}
		if withAuthz && res.Authorization != nil {
			metaLabels(l, "authz", res.Authorization.Meta)
		}
		return tlsAccept(l, info.peer, false)
	}

	e := &inboundEntry{}
	switch {
	case deny == authz.ReasonNoRoute.String():
		e.authzG = h.st.group(policy(false))
		e.authz = e.authzG.series(h.routeNotFound, nil)
	case deny != "":
		e.authzG = h.st.group(policy(false))
		e.authz = e.authzG.series(h.authzDeny, (&labels{}).add("reason", deny))
	default:
		e.authzG = h.st.group(policy(true))
		f := h.authzAllow
		if res.Decision == authz.Audit {
			f = h.authzAudit
		}
		e.authz = e.authzG.series(f, nil)

		el := (&labels{}).add("direction", Inbound)
		pl := policy(true)
		el.names, el.values = append(el.names, pl.names...), append(el.values, pl.values...)
		e.ep = h.reqSeries(&h.ep, el)

		rl := (&labels{}).add("direction", Inbound)
		rl.addIf("dst", info.dstName)
		name := "default"
		if hasRoute {
			name = routeMeta.Name
			if routeMeta.Default != "" {
				name = routeMeta.Default
			}
		}
		rl.add("rt_route", labelValue(name))
		e.rt = h.reqSeries(&h.route, rl)
		e.checked = append(e.checked, e.ep.g, e.rt.g)
	}
	e.checked = append(e.checked, e.authzG)
	return e
}
