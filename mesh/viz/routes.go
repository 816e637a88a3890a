package viz

import (
	"sort"
	"strings"
)

// DefaultRoute names the traffic that matched no named route, as Linkerd
// shows it.
const DefaultRoute = "[DEFAULT]"

// RouteRow is one line of `weft viz routes`.
type RouteRow struct {
	// Direction is "inbound" (routes the resource serves) or "outbound"
	// (routes it calls).
	Direction string
	// Authority is the route's destination (the dst label).
	Authority string
	Route     string
	Golden
}

// Routes returns per-route golden metrics of the pods r selects, from the
// route_* series: with to empty, the routes they serve (inbound); with to
// set, the routes they call on authorities that start with to (outbound;
// "backend" matches backend.demo.svc.cluster.local:8081). Traffic that
// matched no named route is under DefaultRoute.
func Routes(w Window, r Resource, to string) []RouteRow {
	var targets []Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
	}
	selected := map[string]bool{}
	for _, t := range r.Select(targets) {
		selected[t.Key()] = true
	}
	dir := "inbound"
	if to != "" {
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
		if to != "" && !strings.HasPrefix(l["dst"], to) {
			continue
		}
		rt := l["rt_route"]
		if rt == "" {
			rt = DefaultRoute
		}
		k := key{l["dst"], rt}
		row := rows[k]
		if row == nil {
			row = &RouteRow{Direction: dir, Authority: k.auth, Route: rt}
			rows[k] = row
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
