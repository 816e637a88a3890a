package policy

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// streamRoute is a Gateway API TCPRoute or TLSRoute as the outbound side
// reads it: routes of whole connections, with no request to match. A
// TLSRoute picks its connections by the SNI of the client's ClientHello
// (its hostnames); a TCPRoute takes every connection of its parent's port.
type streamRoute struct {
	ref     ObjectRef
	meta    authz.Meta
	objMeta *metav1.ObjectMeta
	created time.Time
	parents []parentRef
	// snis are a TLSRoute's hostnames (none: every SNI); nil for a
	// TCPRoute.
	snis []authz.HostMatch
	// backends are the backendRefs of the route's one rule (none: the
	// parent's own backend).
	backends []gatewayv1.BackendRef
}

// streamAttach is a stream route attached to one parent, on port (0 for
// every port of the parent).
type streamAttach struct {
	r    *streamRoute
	port int32
}

// translateStreamRoute applies Linkerd's admission rules for TCPRoutes
// and TLSRoutes (the webhook, the static source and the Kubernetes source
// all come here): an EgressNetwork parent names a port, and the route has
// exactly one rule. A TLSRoute's hostnames follow the HTTPRoute hostname
// rules (exact, or a leading "*." for every subdomain).
func translateStreamRoute(p *problems, kind string, meta *metav1.ObjectMeta, parentRefs []gatewayv1.ParentReference, hostnames []gatewayv1.Hostname, rules [][]gatewayv1.BackendRef) (*streamRoute, bool) {
	ref := ObjectRef{Kind: kind, Namespace: meta.Namespace, Name: meta.Name}
	r := &streamRoute{
		ref:     ref,
		meta:    authz.Meta{Group: gatewayv1.GroupName, Kind: kind, Namespace: meta.Namespace, Name: meta.Name},
		objMeta: meta,
		created: meta.CreationTimestamp.Time,
		parents: translateParents(meta.Namespace, parentRefs),
	}
	ok := true
	for i, pr := range r.parents {
		if isEgressParent(pr) && !pr.hasPort {
			p.errorf(ref, fmt.Sprintf("spec.parentRefs[%d].port", i), "cannot target an EgressNetwork without specifying a port")
			ok = false
		}
	}
	if len(rules) != 1 {
		p.errorf(ref, "spec.rules", "a %s supports a single rule only, this one has %d", kind, len(rules))
		ok = false
	} else {
		r.backends = rules[0]
	}
	if kind == "TLSRoute" {
		hosts, good := translateHosts(p, ref, hostnames)
		r.snis = hosts
		ok = ok && good
	}
	return r, ok
}

// translateStreamRoutes translates every TCPRoute and TLSRoute; those
// refused are left out (Build reports why).
func (b *builder) translateStreamRoutes() (tcp, tls []*streamRoute) {
	for _, r := range b.objs.TCPRoutes {
		rules := make([][]gatewayv1.BackendRef, len(r.Spec.Rules))
		for i, rule := range r.Spec.Rules {
			rules[i] = rule.BackendRefs
		}
		if s, ok := translateStreamRoute(b.p, "TCPRoute", &r.ObjectMeta, r.Spec.ParentRefs, nil, rules); ok {
			tcp = append(tcp, s)
		}
	}
	for _, r := range b.objs.TLSRoutes {
		rules := make([][]gatewayv1.BackendRef, len(r.Spec.Rules))
		for i, rule := range r.Spec.Rules {
			rules[i] = rule.BackendRefs
		}
		if s, ok := translateStreamRoute(b.p, "TLSRoute", &r.ObjectMeta, r.Spec.ParentRefs, r.Spec.Hostnames, rules); ok {
			tls = append(tls, s)
		}
	}
	return tcp, tls
}

// attachStreamRoutes attaches each route to the Services and
// EgressNetworks its parentRefs name: a Service in the route's namespace
// takes it as a producer route, a Service in another namespace as a
// consumer route of the route's namespace (as HTTPRoutes); an
// EgressNetwork only in the route's own namespace (consumer routes of an
// EgressNetwork are not supported). egress finds an EgressNetwork by name
// (nil when there is none).
func (b *builder) attachStreamRoutes(routes []*streamRoute, ox *outboundIndex, egress func(nsName) *egressNet, tls bool) {
	for _, r := range routes {
		for _, pr := range r.parents {
			service, egressParent := isServiceParent(pr), isEgressParent(pr)
			if !service && !egressParent {
				continue
			}
			a := &streamAttach{r: r, port: pr.port}
			if service {
				si, ok := ox.services[nsName{pr.namespace, pr.name}]
				if !ok {
					b.p.warnf(r.ref, "spec.parentRefs", "Service %s/%s not found", pr.namespace, pr.name)
					continue
				}
				tcp, tlsRoutes := &si.tcp, &si.tls
				if pr.namespace != r.ref.Namespace {
					c := ox.consumer(si, r.ref.Namespace)
					tcp, tlsRoutes = &c.tcp, &c.tls
				}
				if tls {
					*tlsRoutes = append(*tlsRoutes, a)
				} else {
					*tcp = append(*tcp, a)
				}
				continue
			}
			if pr.namespace != r.ref.Namespace {
				b.p.warnf(r.ref, "spec.parentRefs", "routes for an EgressNetwork in another namespace are not supported; ignored for %s/%s", pr.namespace, pr.name)
				continue
			}
			e := egress(nsName{pr.namespace, pr.name})
			if e == nil {
				b.p.warnf(r.ref, "spec.parentRefs", "EgressNetwork %s/%s not found", pr.namespace, pr.name)
				continue
			}
			if tls {
				e.tls = append(e.tls, a)
			} else {
				e.tcp = append(e.tcp, a)
			}
		}
	}
}

// sortStreams orders attached routes oldest first, then by name, as
// Linkerd's controller does.
func sortStreams(as []*streamAttach) {
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && routeLess(as[j].r.created, as[j-1].r.created, as[j].r.meta, as[j-1].r.meta); j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}

// streamsFor returns the attached routes that apply to port.
func streamsFor(as []*streamAttach, port uint16) []*streamAttach {
	var out []*streamAttach
	for _, a := range as {
		if a.port == 0 || a.port == int32(port) {
			out = append(out, a)
		}
	}
	return out
}
