package viz

import (
	"sort"
	"strings"
)

// Workload names one workload: a namespace, a kind ("deployment", or
// "service" / "identity" when only that is known of a peer) and a name.
// A destination outside the mesh that an EgressNetwork covers is named by
// the EgressNetwork, with kind KindEgressNetwork.
type Workload struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

func (w Workload) String() string { return w.Namespace + "/" + w.Name }

// KindEgressNetwork is the Workload kind of traffic that left the mesh to
// destinations under an EgressNetwork.
const KindEgressNetwork = "egressnetwork"

// egressDenyRoutes are the default routes of an EgressNetwork whose
// traffic policy is Deny: every response on them is the proxy's refusal.
var egressDenyRoutes = map[string]bool{"http-egress-deny": true, "grpc-egress-deny": true}

// Edge is traffic from one workload to another over a window, as both
// proxies saw it.
type Edge struct {
	Src, Dst Workload
	// ClientID is the source's identity as the destination's proxy
	// verified it (mutual TLS); ServerID the destination's identity as
	// the source's proxy verified it. Either is empty when that side did
	// not see mutual TLS, or was not scraped.
	ClientID, ServerID string
	// Out is what the source's proxy counted (outbound), In what the
	// destination's proxy counted (inbound, requests it let through).
	Out, In Golden
	// Denied counts requests (and connections) the destination's proxy
	// refused by policy; for an EgressNetwork, what its Deny policy or a
	// Forbidden route refused in the source's proxy.
	Denied float64
	// Connections counts TCP connections the source's proxy opened to the
	// destination (opaque and HTTP alike); for an EgressNetwork, the
	// opaque and TLS connections its routes took, refused ones included.
	Connections float64
}

// Golden returns the source's view when it was scraped, else the
// destination's.
func (e Edge) Golden() Golden {
	if e.Out.Requests() > 0 {
		return e.Out
	}
	return e.In
}

// Secured reports whether both proxies verified each other's identity.
func (e Edge) Secured() bool { return e.ClientID != "" && e.ServerID != "" }

// Identities maps mesh identities and pods to workloads, from the targets
// a window covers.
type Identities struct {
	byID    map[string]Workload
	byPod   map[string]Workload
	targets []Target
}

// NewIdentities indexes targets. An identity shared by pods of several
// workloads (one service account for two deployments) resolves to the
// service account, as that is all mutual TLS can tell.
func NewIdentities(ts []Target) *Identities {
	ix := &Identities{byID: map[string]Workload{}, byPod: map[string]Workload{}, targets: ts}
	shared := map[string]bool{}
	for _, t := range ts {
		w := Workload{Namespace: t.Namespace, Kind: t.WorkloadKind, Name: t.Workload}
		if w.Name == "" {
			w = Workload{Namespace: t.Namespace, Kind: "pod", Name: t.Pod}
		}
		ix.byPod[t.Key()] = w
		if t.Identity == "" {
			continue
		}
		if prev, ok := ix.byID[t.Identity]; ok && prev != w {
			shared[t.Identity] = true
		}
		ix.byID[t.Identity] = w
	}
	for id := range shared {
		ix.byID[id] = Workload{Namespace: "", Kind: "identity", Name: ShortIdentity(id)}
	}
	return ix
}

// ByIdentity returns the workload holding identity id. When no target
// holds it (a Prometheus window knows the identities of servers only),
// the service account and namespace in a Linkerd-style name
// (SA.NS.serviceaccount.identity...) are matched with the targets'
// service accounts, then with a workload of the same name, when exactly
// one matches. Otherwise it comes back as kind "identity" with the short
// name.
func (ix *Identities) ByIdentity(id string) Workload {
	if w, ok := ix.byID[id]; ok {
		return w
	}
	short := ShortIdentity(id)
	if sa, ns, ok := strings.Cut(short, "."); ok && short != id {
		if w, ok := ix.unique(func(t Target) bool { return t.Namespace == ns && t.ServiceAccount == sa }); ok {
			return w
		}
		if w, ok := ix.unique(func(t Target) bool { return t.Namespace == ns && t.Workload == sa }); ok {
			return w
		}
	}
	return Workload{Kind: "identity", Name: short}
}

func (ix *Identities) unique(match func(Target) bool) (Workload, bool) {
	var found Workload
	n := 0
	for _, t := range ix.targets {
		if !match(t) {
			continue
		}
		w := ix.byPod[t.Key()]
		if n == 0 || w != found {
			n++
			found = w
		}
	}
	return found, n == 1
}

// Source returns the workload of the scraped pod a series came from.
func (ix *Identities) Source(l map[string]string) (Workload, bool) {
	if w, ok := ix.byPod[l["namespace"]+"/"+l["pod"]]; ok {
		return w, true
	}
	kind, name := workloadOf(l, "")
	return Workload{Namespace: l["namespace"], Kind: kind, Name: name}, name != ""
}

// Destination returns the workload an outbound series went to, from its
// dst_* labels (the Destination API's metric labels): the workload kind
// label, else the pod, else the service.
func (ix *Identities) Destination(l map[string]string) (Workload, bool) {
	ns := l["dst_namespace"]
	if kind, name := workloadOf(l, "dst_"); name != "" {
		return Workload{Namespace: ns, Kind: kind, Name: name}, true
	}
	if pod := l["dst_pod"]; pod != "" {
		if w, ok := ix.byPod[ns+"/"+pod]; ok {
			return w, true
		}
		return Workload{Namespace: ns, Kind: "pod", Name: pod}, true
	}
	if svc := l["dst_service"]; svc != "" {
		return Workload{Namespace: ns, Kind: "service", Name: svc}, true
	}
	return Workload{}, false
}

type edgeKey struct{ src, dst Workload }

// Edges returns who called whom over w: from the outbound series of each
// source (with the destination from the dst_* labels and the server
// identity it verified) joined with the inbound series of each
// destination (the client identity it verified, mapped back to a
// workload) and its authorization denials. HTTP traffic that left the
// mesh to destinations under an EgressNetwork is one edge to the
// EgressNetwork (kind KindEgressNetwork), from the route series the
// proxies label with it; requests its Deny policy refused (its
// http-egress-deny and grpc-egress-deny routes) count as Denied. Its
// opaque and TLS connections come from the TCP and TLS route series: each
// is a Connection, and those closed as forbidden are Denied too. Edges
// are sorted by source, then destination.
func Edges(w Window) []Edge {
	var targets []Target
	for _, ts := range w.Targets {
		targets = append(targets, ts.Target)
	}
	ix := NewIdentities(targets)
	edges := map[edgeKey]*Edge{}
	get := func(src, dst Workload) *Edge {
		k := edgeKey{src, dst}
		e := edges[k]
		if e == nil {
			e = &Edge{Src: src, Dst: dst}
			edges[k] = e
		}
		return e
	}
	// egress is the edge from the series' source to the EgressNetwork
	// its route series names, or nil for any other parent (a Service's
	// traffic is counted from its own series) or an unknown source.
	egress := func(l map[string]string) *Edge {
		if EgressParent(l) == "" {
			return nil
		}
		src, ok := ix.Source(l)
		if !ok {
			return nil
		}
		return get(src, Workload{Namespace: l[labelParentNamespace], Kind: KindEgressNetwork, Name: l[labelParentName]})
	}
	for _, s := range w.Series {
		l := s.Labels
		switch {
		case l["direction"] == "outbound" && (s.Name == MetricResponses || s.Name == MetricLatency+"_bucket" || s.Name == MetricTCPOpenTotal):
			src, ok := ix.Source(l)
			if !ok {
				continue
			}
			dst, ok := ix.Destination(l)
			if !ok {
				continue
			}
			e := get(src, dst)
			if id := l["server_id"]; id != "" && l["tls"] == "true" {
				e.ServerID = id
			}
			switch s.Name {
			case MetricResponses:
				e.Out.addResponse(s)
			case MetricTCPOpenTotal:
				e.Connections += s.Value
			default:
				e.Out.Latency = e.Out.Latency.Add(s)
			}
		case l["direction"] == "outbound" && (s.Name == MetricRouteResp || s.Name == MetricRouteLatency+"_bucket"):
			// Only an EgressNetwork's routes: a Service's requests are
			// counted from their response_total series above.
			e := egress(l)
			if e == nil {
				continue
			}
			if s.Name == MetricRouteResp {
				e.Out.addResponse(s)
				if egressDenyRoutes[l["rt_route"]] {
					e.Denied += s.Value
				}
			} else {
				e.Out.Latency = e.Out.Latency.Add(s)
			}
		case s.Name == MetricTCPRouteOpen || s.Name == MetricTLSRouteOpen || s.Name == MetricTCPRouteClose || s.Name == MetricTLSRouteClose:
			// Only an EgressNetwork's routes: connections to a Service are
			// counted from their tcp_open_total series above.
			e := egress(l)
			if e == nil {
				continue
			}
			switch {
			case s.Name == MetricTCPRouteOpen || s.Name == MetricTLSRouteOpen:
				e.Connections += s.Value
			case l["error"] == "forbidden":
				e.Denied += s.Value
			}
		case l["direction"] == "inbound" && (s.Name == MetricResponses || s.Name == MetricLatency+"_bucket"):
			id := l["client_id"]
			if id == "" || l["tls"] != "true" {
				continue // not meshed: no verified source
			}
			dst, ok := ix.Source(l)
			if !ok {
				continue
			}
			e := get(ix.ByIdentity(id), dst)
			e.ClientID = id
			if s.Name == MetricResponses {
				e.In.addResponse(s)
			} else {
				e.In.Latency = e.In.Latency.Add(s)
			}
		case s.Name == MetricHTTPDeny || s.Name == MetricTCPDeny:
			id := l["client_id"]
			if id == "" || l["tls"] != "true" || s.Value == 0 {
				continue
			}
			dst, ok := ix.Source(l)
			if !ok {
				continue
			}
			e := get(ix.ByIdentity(id), dst)
			e.ClientID = id
			e.Denied += s.Value
		}
	}
	out := make([]Edge, 0, len(edges))
	for _, e := range edges {
		if e.Out.Requests() == 0 && e.In.Requests() == 0 && e.Denied == 0 && e.Connections == 0 {
			continue
		}
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Src != out[j].Src {
			return out[i].Src.String() < out[j].Src.String()
		}
		return out[i].Dst.String() < out[j].Dst.String()
	})
	return out
}
