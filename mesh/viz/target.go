package viz

import (
	"fmt"
	"net/netip"
	"strings"
)

// Target is one meshed pod whose proxy viz reads: its /metrics and, when
// the source supports it, its tap.
type Target struct {
	Namespace string
	Pod       string
	// WorkloadKind is the lower-case kind of the pod's workload as
	// Linkerd's metric labels name it ("deployment", "statefulset",
	// "daemonset", ...); Workload its name. Both may be empty.
	WorkloadKind string
	Workload     string
	// ServiceAccount and Identity are the pod's service account and the
	// mesh identity its proxy holds.
	ServiceAccount string
	Identity       string
	// IP is the pod's address (tap events name peers by address).
	IP netip.Addr
	// Admin is where the source reaches the proxy's admin server
	// (host:port for a direct source; informational otherwise).
	Admin string
	// Tap is where the source reaches the proxy's tap server, if any.
	Tap string
}

// Key identifies the target: NAMESPACE/POD.
func (t Target) Key() string { return t.Namespace + "/" + t.Pod }

func (t Target) String() string { return "pod " + t.Key() }

// Labels are the labels a scrape adds to each of the target's series, as
// Linkerd's Prometheus configuration does: namespace, pod and the
// workload kind with the workload's name (deployment="web").
func (t Target) Labels() map[string]string {
	l := map[string]string{"namespace": t.Namespace, "pod": t.Pod}
	if t.WorkloadKind != "" && t.Workload != "" {
		l[t.WorkloadKind] = t.Workload
	}
	return l
}

// WorkloadKinds are the workload kinds, in the order a series' labels are
// searched for its workload, with the label Linkerd gives each.
var WorkloadKinds = []string{"deployment", "statefulset", "daemonset", "k8s_job", "cronjob", "replicaset", "replicationcontroller"}

// workloadOf returns the workload kind and name a series' labels name, with
// prefix "" (the scraped pod's own workload) or "dst_" (the destination's).
func workloadOf(l map[string]string, prefix string) (kind, name string) {
	for _, k := range WorkloadKinds {
		if v := l[prefix+k]; v != "" {
			return k, v
		}
	}
	return "", ""
}

// Kind is what a view groups by.
type Kind string

// Kinds of resources the views group by.
const (
	KindNamespace Kind = "namespace"
	KindWorkload  Kind = "workload" // any workload kind; Resource.WorkloadKind says which
	KindPod       Kind = "pod"
	KindAuthority Kind = "authority"
	KindRoute     Kind = "route"
)

// Resource selects what a view shows: a kind, optionally one namespace
// (empty: all) and one name (empty: all of the kind).
type Resource struct {
	Kind Kind
	// WorkloadKind narrows KindWorkload to one kind ("deployment"); empty
	// matches every kind.
	WorkloadKind string
	Namespace    string
	Name         string
}

var kindAliases = map[string]struct {
	kind     Kind
	workload string
}{
	"ns": {KindNamespace, ""}, "namespace": {KindNamespace, ""}, "namespaces": {KindNamespace, ""},
	"po": {KindPod, ""}, "pod": {KindPod, ""}, "pods": {KindPod, ""},
	"au": {KindAuthority, ""}, "authority": {KindAuthority, ""}, "authorities": {KindAuthority, ""},
	"rt": {KindRoute, ""}, "route": {KindRoute, ""}, "routes": {KindRoute, ""},
	"workload": {KindWorkload, ""}, "workloads": {KindWorkload, ""}, "wl": {KindWorkload, ""},
	"deploy": {KindWorkload, "deployment"}, "deployment": {KindWorkload, "deployment"}, "deployments": {KindWorkload, "deployment"},
	"sts": {KindWorkload, "statefulset"}, "statefulset": {KindWorkload, "statefulset"}, "statefulsets": {KindWorkload, "statefulset"},
	"ds": {KindWorkload, "daemonset"}, "daemonset": {KindWorkload, "daemonset"}, "daemonsets": {KindWorkload, "daemonset"},
	"job": {KindWorkload, "k8s_job"}, "jobs": {KindWorkload, "k8s_job"},
}

// ParseResource reads TYPE or TYPE/NAME (deploy, deployment/web, ns/demo,
// po/web-0, au, rt) in namespace ns.
func ParseResource(s, ns string) (Resource, error) {
	kind, name, _ := strings.Cut(s, "/")
	a, ok := kindAliases[strings.ToLower(kind)]
	if !ok {
		return Resource{}, fmt.Errorf("viz: unknown resource type %q (want namespace, deployment, statefulset, daemonset, job, workload, pod, authority or route)", kind)
	}
	if strings.Contains(name, "/") {
		return Resource{}, fmt.Errorf("viz: resource %q: want TYPE or TYPE/NAME", s)
	}
	r := Resource{Kind: a.kind, WorkloadKind: a.workload, Namespace: ns, Name: name}
	if r.Kind == KindNamespace {
		r.Namespace = name
		if name == "" {
			r.Namespace = ""
		}
	}
	return r, nil
}

func (r Resource) String() string {
	k := string(r.Kind)
	if r.Kind == KindWorkload && r.WorkloadKind != "" {
		k = r.WorkloadKind
	}
	if r.Name != "" {
		return k + "/" + r.Name
	}
	return k
}

// Select returns the targets a resource covers (every target in its
// namespace for authority and route).
func (r Resource) Select(ts []Target) []Target {
	var out []Target
	for _, t := range ts {
		if r.Namespace != "" && t.Namespace != r.Namespace {
			continue
		}
		switch r.Kind {
		case KindPod:
			if r.Name != "" && t.Pod != r.Name {
				continue
			}
		case KindWorkload:
			if r.WorkloadKind != "" && t.WorkloadKind != r.WorkloadKind {
				continue
			}
			if r.Name != "" && t.Workload != r.Name {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

// ShortIdentity turns web.shop.serviceaccount.identity.weft.cluster.local
// into web.shop, as Linkerd's tables show identities.
func ShortIdentity(id string) string {
	if i := strings.Index(id, ".serviceaccount.identity."); i > 0 {
		return id[:i]
	}
	return id
}
