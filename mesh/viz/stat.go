package viz

import (
	"math"
	"sort"
	"time"
)

// Linkerd's metric and label names, which Weft's proxies export and every
// view reads.
const (
	MetricRequests      = "request_total"
	MetricResponses     = "response_total"
	MetricLatency       = "response_latency_ms"
	MetricRouteRequests = "route_request_total"
	MetricRouteResp     = "route_response_total"
	MetricRouteLatency  = "route_response_latency_ms"
	MetricTCPOpen       = "tcp_open_connections"
	MetricTCPOpenTotal  = "tcp_open_total"
	MetricHTTPAllow     = "inbound_http_authz_allow_total"
	MetricHTTPDeny      = "inbound_http_authz_deny_total"
	MetricTCPAllow      = "inbound_tcp_authz_allow_total"
	MetricTCPDeny       = "inbound_tcp_authz_deny_total"
	// Outbound connections on TCP and TLS routes (built-in opaque routes
	// included), with parent_*, route_* and, on close, error.
	MetricTCPRouteOpen  = "outbound_tcp_route_open_total"
	MetricTCPRouteClose = "outbound_tcp_route_close_total"
	MetricTLSRouteOpen  = "outbound_tls_route_open_total"
	MetricTLSRouteClose = "outbound_tls_route_close_total"
)

// Golden are the golden metrics of one group of traffic over a window.
type Golden struct {
	// Successes and Failures count responses by classification.
	Successes, Failures float64
	// Denied counts the requests the proxy's authorization policy refused
	// (Stat only). They are requests the workload was sent, so they are
	// in Successes or Failures too, classified as Linkerd classifies the
	// answer the proxy gives them: an HTTP 403 is not a failure (only 5xx
	// is), a gRPC PERMISSION_DENIED (on a GRPCRoute) is one.
	Denied float64
	// MTLS counts responses whose request came over mutual TLS.
	MTLS float64
	// Latency is the response latency histogram in milliseconds.
	Latency Histogram
}

// Requests is the number of responses (successful or not).
func (g Golden) Requests() float64 { return g.Successes + g.Failures }

// SuccessRate is Successes/Requests, NaN without requests.
func (g Golden) SuccessRate() float64 {
	if g.Requests() == 0 {
		return math.NaN()
	}
	return g.Successes / g.Requests()
}

// MTLSShare is the share of requests over mutual TLS, NaN without
// requests.
func (g Golden) MTLSShare() float64 {
	if g.Requests() == 0 {
		return math.NaN()
	}
	return g.MTLS / g.Requests()
}

// RPS is the request rate over d, NaN when d is 0 (a window "since start").
func (g Golden) RPS(d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return g.Requests() / d.Seconds()
}

// P returns the q-quantile of the latency in milliseconds (NaN when no
// latency was observed).
func (g Golden) P(q float64) float64 { return g.Latency.Quantile(q) }

// addResponse adds one response_total-like series to g.
func (g *Golden) addResponse(s Series) {
	switch s.Labels["classification"] {
	case "failure":
		g.Failures += s.Value
	default:
		g.Successes += s.Value
	}
	if s.Labels["tls"] == "true" {
		g.MTLS += s.Value
	}
}

// addDenied adds one inbound_http_authz_deny_total series to g. Denied
// requests have no response_total series (the proxy answers them itself,
// before the request metrics), so they count here: a request on a gRPC
// route was answered grpc-status PERMISSION_DENIED, a failure; any other
// was answered 403, which Linkerd's classification counts as a success.
func (g *Golden) addDenied(s Series) {
	g.Denied += s.Value
	if s.Labels["route_kind"] == "grpcroute" {
		g.Failures += s.Value
	} else {
		g.Successes += s.Value
	}
	if s.Labels["tls"] == "true" {
		g.MTLS += s.Value
	}
}

// StatRow is one line of `weft viz stat`.
type StatRow struct {
	Kind      Kind
	Namespace string
	// Name is the namespace, workload, pod, authority or route; for a
	// route, Authority is the route's destination.
	Name         string
	WorkloadKind string
	Authority    string
	// Pods counts the targets of the row; Meshed those whose proxy
	// answered.
	Pods, Meshed int
	Golden
	// TCPConnections is the number of open inbound TCP connections at the
	// window's end.
	TCPConnections float64
}

type statKey struct {
	ns, kind, name, authority string
}

// Stat computes the golden metrics of each resource of r's kind over w,
// from the inbound side of the selected pods' proxies (what the workload
// served, as `linkerd viz stat` shows; routes from the inbound route_*
// series). Requests the selected pods' policy denied count as requests
// (Golden.Denied says how they are classified). Authorities come from the callers' side (the outbound
// authority label), in the destination's namespace. Rows are sorted by namespace and name; a
// selected workload or pod without traffic still gets a row.
func Stat(w Window, r Resource) []StatRow {
	rows := map[statKey]*StatRow{}
	selected := map[string]bool{}
	var targets []Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
	}
	for _, t := range r.Select(targets) {
		selected[t.Key()] = true
	}
	get := func(k statKey) *StatRow {
		row := rows[k]
		if row == nil {
			row = &StatRow{Kind: r.Kind, Namespace: k.ns, WorkloadKind: k.kind, Name: k.name, Authority: k.authority}
			rows[k] = row
		}
		return row
	}
	keyOf := func(l map[string]string) (statKey, bool) {
		if r.Kind == KindAuthority {
			// Authorities are what callers named (the outbound side's
			// authority label; inbound series carry none, as in
			// Linkerd), placed in the destination's namespace.
			a, ns := l["authority"], l["dst_namespace"]
			if ns == "" {
				ns = l["namespace"]
			}
			if a == "" || (r.Name != "" && a != r.Name) || (r.Namespace != "" && ns != r.Namespace) {
				return statKey{}, false
			}
			return statKey{ns: ns, name: a}, true
		}
		if !selected[l["namespace"]+"/"+l["pod"]] {
			return statKey{}, false
		}
		switch r.Kind {
		case KindNamespace:
			return statKey{ns: l["namespace"], name: l["namespace"]}, true
		case KindPod:
			return statKey{ns: l["namespace"], name: l["pod"]}, true
		case KindWorkload:
			kind, name := workloadOf(l, "")
			return statKey{ns: l["namespace"], kind: kind, name: name}, name != ""
		case KindRoute:
			rt := routeName(l["rt_route"])
			if r.Name != "" && rt != r.Name {
				return statKey{}, false
			}
			return statKey{ns: l["namespace"], name: rt, authority: l["dst"]}, true
		}
		return statKey{}, false
	}
	// Every selected target contributes a row, traffic or not.
	for _, ts := range w.Targets {
		t := ts.Target
		if !selected[t.Key()] || r.Kind == KindAuthority || r.Kind == KindRoute {
			continue
		}
		k, ok := keyOf(t.Labels())
		if !ok {
			continue
		}
		row := get(k)
		row.Pods++
		if ts.Err == nil {
			row.Meshed++
		}
	}
	respName, latName := MetricResponses, MetricLatency+"_bucket"
	if r.Kind == KindRoute {
		respName, latName = MetricRouteResp, MetricRouteLatency+"_bucket"
	}
	dir := "inbound"
	if r.Kind == KindAuthority {
		dir = "outbound"
	}
	for _, s := range w.Series {
		if s.Name == MetricHTTPDeny {
			// What the workload was sent and its proxy refused; these
			// series carry no direction (they are inbound) and no route
			// or authority label of the stat's kinds.
			if r.Kind == KindAuthority || r.Kind == KindRoute {
				continue
			}
			if k, ok := keyOf(s.Labels); ok {
				get(k).addDenied(s)
			}
			continue
		}
		if s.Labels["direction"] != dir {
			continue
		}
		switch s.Name {
		case respName:
			if k, ok := keyOf(s.Labels); ok {
				get(k).addResponse(s)
			}
		case latName:
			if k, ok := keyOf(s.Labels); ok {
				row := get(k)
				row.Latency = row.Latency.Add(s)
			}
		case MetricTCPOpen:
			if s.Labels["peer"] != "" && s.Labels["peer"] != "src" {
				continue
			}
			if r.Kind == KindAuthority || r.Kind == KindRoute {
				continue
			}
			if k, ok := keyOf(s.Labels); ok {
				get(k).TCPConnections += s.Value
			}
		}
	}
	out := make([]StatRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Authority < out[j].Authority
	})
	return out
}
