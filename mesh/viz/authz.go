package viz

import (
	"fmt"
	"sort"
	"strings"
)

// AuthzRow is one line of `weft viz authz`: what one authorization of a
// server (and route) let through, or, with Authorization empty, what that
// server and route denied.
type AuthzRow struct {
	Namespace string
	// Server is "KIND:NAME" (Server/web-http, default:all-authenticated).
	Server string
	Route  string
	// Authorization is "KIND/NAME" (authorizationpolicy/web-gateway);
	// empty on the row of denied traffic.
	Authorization string
	// Port is the target port.
	Port string
	// Allowed and Denied count HTTP requests and TCP connections.
	Allowed, Denied float64
	// Clients are the client identities on the row with their counts
	// ("" for clients without mutual TLS).
	Clients []ClientCount
	// Denials are the pairs to explain (Denied rows only): one per denied
	// client identity and pod.
	Denials []DeniedPair
}

// ClientCount is a client identity and how many requests or connections
// it made.
type ClientCount struct {
	Identity string
	Count    float64
}

// DeniedPair is a client that a pod's proxy refused on a port, the input
// of `weft policy explain`.
type DeniedPair struct {
	// From is the client's verified identity ("" without mutual TLS) and
	// FromWorkload the workload holding it, when known.
	From         string
	FromWorkload Workload
	// To is the pod that refused, Port the target port.
	ToNamespace, ToPod string
	Port               string
	Count              float64
}

// ExplainCommand is the `weft policy explain` command line that explains
// the denial, reading the manifests at manifests (a placeholder when
// empty).
func (d DeniedPair) ExplainCommand(manifests string) string {
	if manifests == "" {
		manifests = "PATH"
	}
	var from string
	switch {
	case d.From == "":
		from = "--from-unauthenticated"
	default:
		from = "--from-identity " + d.From
	}
	return fmt.Sprintf("weft policy explain --manifests %s --to-workload pod/%s --to-namespace %s --to-port %s %s",
		manifests, d.ToPod, d.ToNamespace, d.Port, from)
}

// DiagnosticsCommand is the `weft diagnostics policy` command line that
// shows the policy the cluster's policy controller serves the refusing
// pod's port: what its proxy enforced, with no manifests at hand.
func (d DeniedPair) DiagnosticsCommand() string {
	return fmt.Sprintf("weft diagnostics policy -n %s po/%s %s", d.ToNamespace, d.ToPod, d.Port)
}

func kindName(l map[string]string, prefix, sep string) string {
	kind, name := l[prefix+"_kind"], l[prefix+"_name"]
	switch {
	case name == "":
		return ""
	case kind == "":
		return name
	}
	return strings.ToLower(kind) + sep + name
}

// Authz returns the authorization decisions of the pods r selects over w,
// from the inbound_{http,tcp}_authz_{allow,deny}_total series: one row per
// server, route and authorization that allowed traffic, and one per server
// and route that denied some, with the denied clients. Rows are sorted by
// server, route, then authorization (denials last).
func Authz(w Window, r Resource) []AuthzRow {
	var targets []Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
	}
	ix := NewIdentities(targets)
	selected := map[string]bool{}
	for _, t := range r.Select(targets) {
		selected[t.Key()] = true
	}
	type key struct{ ns, srv, route, authz, port string }
	rows := map[key]*AuthzRow{}
	clients := map[key]map[string]float64{}
	pairs := map[key]map[DeniedPair]float64{}
	for _, s := range w.Series {
		l := s.Labels
		allow := s.Name == MetricHTTPAllow || s.Name == MetricTCPAllow
		deny := s.Name == MetricHTTPDeny || s.Name == MetricTCPDeny
		if (!allow && !deny) || !selected[l["namespace"]+"/"+l["pod"]] {
			continue
		}
		k := key{ns: l["namespace"], srv: kindName(l, "srv", ":"), route: l["route_name"], port: l["target_port"]}
		if allow {
			k.authz = kindName(l, "authz", "/")
		}
		row := rows[k]
		if row == nil {
			row = &AuthzRow{Namespace: k.ns, Server: k.srv, Route: k.route, Authorization: k.authz, Port: k.port}
			rows[k] = row
			clients[k] = map[string]float64{}
			pairs[k] = map[DeniedPair]float64{}
		}
		id := l["client_id"]
		if l["tls"] != "true" {
			id = ""
		}
		clients[k][id] += s.Value
		if allow {
			row.Allowed += s.Value
			continue
		}
		row.Denied += s.Value
		p := DeniedPair{From: id, ToNamespace: l["namespace"], ToPod: l["pod"], Port: l["target_port"]}
		if id != "" {
			p.FromWorkload = ix.ByIdentity(id)
		}
		pairs[k][p] += s.Value
	}
	out := make([]AuthzRow, 0, len(rows))
	for k, row := range rows {
		if row.Allowed == 0 && row.Denied == 0 {
			continue
		}
		for id, n := range clients[k] {
			if n > 0 {
				row.Clients = append(row.Clients, ClientCount{Identity: id, Count: n})
			}
		}
		sort.Slice(row.Clients, func(i, j int) bool { return row.Clients[i].Identity < row.Clients[j].Identity })
		for p, n := range pairs[k] {
			if n > 0 {
				p.Count = n
				row.Denials = append(row.Denials, p)
			}
		}
		sort.Slice(row.Denials, func(i, j int) bool {
			a, b := row.Denials[i], row.Denials[j]
			if a.From != b.From {
				return a.From < b.From
			}
			return a.ToPod < b.ToPod
		})
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		if a.Route != b.Route {
			return a.Route < b.Route
		}
		if (a.Authorization == "") != (b.Authorization == "") {
			return b.Authorization == ""
		}
		return a.Authorization < b.Authorization
	})
	return out
}
