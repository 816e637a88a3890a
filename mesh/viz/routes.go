package viz

import (
	"sort"
)

// DefaultRoute names the traffic that matched no named route, as Linkerd
// shows it.
const DefaultRoute = "[DEFAULT]"

// defaultRouteLabel is the rt_route value Weft's proxies give requests no
// route named (Linkerd's leave the label out; both show as DefaultRoute).
const defaultRouteLabel = "default"

// routeName returns the name a route series' rt_route shows as.
func routeName(rt string) string {
	if rt == "" || rt == defaultRouteLabel {
		return DefaultRoute
	}
	return rt
}

// RouteRow is one line of `weft viz routes`.
type RouteRow struct {
	// Direction is "inbound" (routes the resource serves) or "outbound"
	// (routes it calls).
	Direction string
	// Authority is the route's destination (the dst label): a Service's
	// canonical name (web.shop.svc.cluster.local:8080) when the proxies
	// know the destination as a Service, its address otherwise.
	Authority string
	Route     string
	// EgressNetwork is the EgressNetwork ("NAMESPACE/NAME") whose route
	// this is, when the destination is under one; empty otherwise.
	EgressNetwork string
	Golden
}

// Routes returns per-route golden metrics of the pods r selects, from the
// route_* series: with to nil, the routes they serve (inbound: the
// ServiceProfile routes of the Service each client called); with to set,
// the routes they call on that Service, address or EgressNetwork
// (outbound; an EgressNetwork's rows are per destination address, its
// own routes and its default route under the name the policy gives it,
// such as http-egress-deny). Traffic that matched no named route is
// under DefaultRoute. Golden.MTLS counts the responses whose request went
// over mutual TLS (the tls label).
func Routes(w Window, r Resource, to *RouteTarget) []RouteRow {
	var targets []Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
	}
	selected := map[string]bool{}
	for _, t := range r.Select(targets) {
		selected[t.Key()] = true
	}
	dir := "inbound"
	if to != nil {
		dir = "outbound"
	}
	type key struct{ auth, route string }
	rows := map[key]*RouteRow{}
	for _, s := range w.Series {
		l := s.Labels
		if l["direction"] != dir || !selected[l["namespace"]+"/"+l["pod"]] {
			continue
		}
		if s.Name != MetricRouteResp && s.Name != MetricRouteLatency+"_bucket" {
			continue
		}
		if to != nil && !to.MatchesSeries(l) {
			continue
		}
		k := key{l["dst"], routeName(l["rt_route"])}
		row := rows[k]
		if row == nil {
			row = &RouteRow{Direction: dir, Authority: k.auth, Route: k.route}
			rows[k] = row
		}
		if p := EgressParent(l); p != "" && dir == "outbound" {
			row.EgressNetwork = p
		}
		if s.Name == MetricRouteResp {
			row.addResponse(s)
		} else {
			row.Latency = row.Latency.Add(s)
		}
	}
	out := make([]RouteRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Authority != out[j].Authority {
			return out[i].Authority < out[j].Authority
		}
		// The default route goes last, as in Linkerd's table.
		if (out[i].Route == DefaultRoute) != (out[j].Route == DefaultRoute) {
			return out[j].Route == DefaultRoute
		}
		return out[i].Route < out[j].Route
	})
	return out
}
