package policy

import (
	"fmt"
	"net/textproto"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

type parentRef struct {
	group, kind, namespace, name string
	port                         int32
	// hasPort and section say whether the reference names a port or a
	// section of its parent (which a Server parent may not).
	hasPort bool
	section string
	// namespaceSet is true when the reference names a namespace.
	namespaceSet bool
}

type httpRouteSpec struct {
	ref     ObjectRef
	group   string // policy.linkerd.io or gateway.networking.k8s.io
	meta    *metav1.ObjectMeta
	parents []parentRef
	// unsupported, when set, names a rule filter Linkerd does not support,
	// for which the route is ignored; unsupportedOut also counts backend
	// filters, which only the outbound side reads. noServer says why the
	// route attaches to no Server (an invalid Server parentRef).
	unsupported, unsupportedOut, noServer string
	route                                 authz.HTTPRoute // without authorizations
	// rules kept for outbound translation
	rules []routeRule
	// emptyRules says the route lists no rules explicitly ("rules: []").
	// Without the field, the API server writes the CRD's default (one
	// rule matching "/"), which rules stands for; an empty list stays
	// empty, and Linkerd's outbound index serves such a route without
	// rules (policy-test outbound_api.rs route_with_no_rules).
	emptyRules bool
}

type routeRule struct {
	matches  []authz.HTTPMatch
	backends []gatewayv1.HTTPBackendRef
	timeouts *gatewayv1.HTTPRouteTimeouts
}

// translateParents reads Gateway API parent references: an omitted group
// means gateway.networking.k8s.io and an omitted kind Gateway, the
// defaults the API server applies.
func translateParents(ns string, in []gatewayv1.ParentReference) []parentRef {
	var out []parentRef
	for _, pr := range in {
		r := parentRef{group: gatewayv1.GroupName, kind: "Gateway", namespace: ns, name: string(pr.Name)}
		if pr.Group != nil {
			r.group = string(*pr.Group)
		}
		if pr.Kind != nil {
			r.kind = string(*pr.Kind)
		}
		if pr.Namespace != nil && *pr.Namespace != "" {
			r.namespace, r.namespaceSet = string(*pr.Namespace), true
		}
		if pr.Port != nil {
			r.port, r.hasPort = int32(*pr.Port), true
		}
		if pr.SectionName != nil {
			r.section = string(*pr.SectionName)
		}
		out = append(out, r)
	}
	return out
}

// translatePolicyParents reads the parent references of a
// policy.linkerd.io HTTPRoute, whose CRD defaults the group to
// policy.linkerd.io (and the kind to Gateway).
func translatePolicyParents(ns string, in []v1beta3.ParentReference) []parentRef {
	var out []parentRef
	for _, pr := range in {
		r := parentRef{group: policyGroup, kind: "Gateway", namespace: ns, name: string(pr.Name)}
		if pr.Group != nil {
			r.group = string(*pr.Group)
		}
		if pr.Kind != nil {
			r.kind = string(*pr.Kind)
		}
		if pr.Namespace != nil && *pr.Namespace != "" {
			r.namespace, r.namespaceSet = string(*pr.Namespace), true
		}
		if pr.Port != nil {
			r.port, r.hasPort = *pr.Port, true
		}
		if pr.SectionName != nil {
			r.section = string(*pr.SectionName)
		}
		out = append(out, r)
	}
	return out
}

func isServerParent(pr parentRef) bool {
	return strings.EqualFold(pr.group, policyGroup) && strings.EqualFold(pr.kind, "Server")
}

// serverParentProblem says why a route's Server parent references keep it
// from every Server, as Linkerd's inbound index refuses the route: a
// Server in another namespace, or a reference by port or section name.
// It returns the field and the reason, or "" when the references are
// usable.
func serverParentProblem(ns string, parents []parentRef) (string, string) {
	for i, pr := range parents {
		if !isServerParent(pr) {
			continue
		}
		switch {
		case pr.namespace != ns:
			return fmt.Sprintf("spec.parentRefs[%d].namespace", i), "a route may not reference a Server in another namespace"
		case pr.hasPort:
			return fmt.Sprintf("spec.parentRefs[%d].port", i), "a route may not reference a Server by port"
		case pr.section != "":
			return fmt.Sprintf("spec.parentRefs[%d].sectionName", i), "a route may not reference a Server by section name"
		}
	}
	return "", ""
}

// unsupportedHTTPFilter names the first filter of a Gateway API HTTPRoute
// that Linkerd does not support (anything but RequestHeaderModifier,
// ResponseHeaderModifier and RequestRedirect), in a rule or, when
// backends is true, on a backend; "" when there is none.
func unsupportedHTTPFilter(rules []gatewayv1.HTTPRouteRule, backends bool) (string, string) {
	ok := func(t gatewayv1.HTTPRouteFilterType) bool {
		switch t {
		case gatewayv1.HTTPRouteFilterRequestHeaderModifier, gatewayv1.HTTPRouteFilterResponseHeaderModifier, gatewayv1.HTTPRouteFilterRequestRedirect:
			return true
		}
		return false
	}
	for i, r := range rules {
		for j, f := range r.Filters {
			if !ok(f.Type) {
				return fmt.Sprintf("spec.rules[%d].filters[%d]", i, j), string(f.Type)
			}
		}
		if !backends {
			continue
		}
		for j, b := range r.BackendRefs {
			for k, f := range b.Filters {
				if !ok(f.Type) {
					return fmt.Sprintf("spec.rules[%d].backendRefs[%d].filters[%d]", i, j, k), string(f.Type)
				}
			}
		}
	}
	return "", ""
}

// unsupportedGRPCFilter names the first filter of a GRPCRoute rule that
// Linkerd does not support (anything but the two header modifiers).
func unsupportedGRPCFilter(rules []gatewayv1.GRPCRouteRule) (string, string) {
	for i, r := range rules {
		for j, f := range r.Filters {
			switch f.Type {
			case gatewayv1.GRPCRouteFilterRequestHeaderModifier, gatewayv1.GRPCRouteFilterResponseHeaderModifier:
			default:
				return fmt.Sprintf("spec.rules[%d].filters[%d]", i, j), string(f.Type)
			}
		}
	}
	return "", ""
}

func translateHTTPMatches(p *problems, ref ObjectRef, field string, ms []gatewayv1.HTTPRouteMatch) ([]authz.HTTPMatch, bool) {
	var out []authz.HTTPMatch
	ok := true
	for i, m := range ms {
		f := fmt.Sprintf("%s.matches[%d]", field, i)
		var hm authz.HTTPMatch
		if m.Path != nil {
			kind := gatewayv1.PathMatchPathPrefix
			if m.Path.Type != nil {
				kind = *m.Path.Type
			}
			value := "/"
			if m.Path.Value != nil {
				value = *m.Path.Value
			}
			switch kind {
			case gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix:
				norm, err := pathnorm.Normalize(value)
				if err != nil {
					p.errorf(ref, f+".path.value", "%v", err)
					ok = false
					continue
				}
				if norm != value {
					p.warnf(ref, f+".path.value", "path %q is matched in its normalized form %q", value, norm)
				}
				k := authz.PathExact
				if kind == gatewayv1.PathMatchPathPrefix {
					k = authz.PathPrefix
				}
				hm.Path = &authz.PathMatch{Kind: k, Value: norm}
			case gatewayv1.PathMatchRegularExpression:
				re, err := authz.CompileAnchored(value)
				if err != nil {
					p.errorf(ref, f+".path.value", "%v", err)
					ok = false
					continue
				}
				hm.Path = &authz.PathMatch{Kind: authz.PathRegex, Value: value, Regex: re}
			default:
				p.errorf(ref, f+".path.type", "unknown path match type %q", kind)
				ok = false
				continue
			}
		}
		seen := map[string]bool{}
		for j, h := range m.Headers {
			name := textproto.CanonicalMIMEHeaderKey(string(h.Name))
			hf := fmt.Sprintf("%s.headers[%d]", f, j)
			if name == "" {
				p.errorf(ref, hf+".name", "empty header name")
				ok = false
				continue
			}
			if seen[name] {
				p.warnf(ref, hf+".name", "header %s is matched twice; only the first match counts (Gateway API)", name)
				continue
			}
			seen[name] = true
			vm, good := valueMatch(p, ref, hf, name, h.Type == nil || *h.Type == gatewayv1.HeaderMatchExact,
				h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression, h.Value)
			if !good {
				ok = false
				continue
			}
			hm.Headers = append(hm.Headers, vm)
		}
		seenQ := map[string]bool{}
		for j, q := range m.QueryParams {
			qf := fmt.Sprintf("%s.queryParams[%d]", f, j)
			if q.Name == "" {
				p.errorf(ref, qf+".name", "empty query parameter name")
				ok = false
				continue
			}
			if seenQ[string(q.Name)] {
				p.warnf(ref, qf+".name", "query parameter %s is matched twice; only the first match counts (Gateway API)", q.Name)
				continue
			}
			seenQ[string(q.Name)] = true
			vm, good := valueMatch(p, ref, qf, string(q.Name), q.Type == nil || *q.Type == gatewayv1.QueryParamMatchExact,
				q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression, q.Value)
			if !good {
				ok = false
				continue
			}
			hm.Query = append(hm.Query, vm)
		}
		if m.Method != nil {
			hm.Method = string(*m.Method)
		}
		out = append(out, hm)
	}
	return out, ok
}

func valueMatch(p *problems, ref ObjectRef, field, name string, exact, regex bool, value string) (authz.ValueMatch, bool) {
	vm := authz.ValueMatch{Name: name}
	switch {
	case regex:
		re, err := authz.CompileAnchored(value)
		if err != nil {
			p.errorf(ref, field+".value", "%v", err)
			return vm, false
		}
		vm.Regex = re
	case exact:
		vm.Exact = value
	default:
		p.errorf(ref, field+".type", "unknown match type")
		return vm, false
	}
	return vm, true
}

func translateHosts(p *problems, ref ObjectRef, hs []gatewayv1.Hostname) ([]authz.HostMatch, bool) {
	var out []authz.HostMatch
	ok := true
	for i, h := range hs {
		s := strings.ToLower(string(h))
		if rest, wild := strings.CutPrefix(s, "*."); wild {
			if rest == "" || strings.Contains(rest, "*") {
				p.errorf(ref, fmt.Sprintf("spec.hostnames[%d]", i), "invalid wildcard hostname %q", h)
				ok = false
				continue
			}
			out = append(out, authz.HostMatch{Value: rest, Suffix: true})
			continue
		}
		if s == "" || strings.Contains(s, "*") {
			p.errorf(ref, fmt.Sprintf("spec.hostnames[%d]", i), "invalid hostname %q", h)
			ok = false
			continue
		}
		out = append(out, authz.HostMatch{Value: s})
	}
	return out, ok
}

func translateHTTPRoute(p *problems, group string, meta *metav1.ObjectMeta, parents []parentRef, hostnames []gatewayv1.Hostname, rules []routeRule, rawRules func(int) []gatewayv1.HTTPRouteMatch) (*httpRouteSpec, bool) {
	kind := "HTTPRoute." + group
	ref := ObjectRef{Kind: kind, Namespace: meta.Namespace, Name: meta.Name}
	spec := &httpRouteSpec{ref: ref, group: group, meta: meta, parents: parents}
	ok := true
	hosts, good := translateHosts(p, ref, hostnames)
	ok = ok && good
	spec.route = authz.HTTPRoute{
		Meta:    authz.Meta{Group: group, Kind: "HTTPRoute", Namespace: meta.Namespace, Name: meta.Name},
		Hosts:   hosts,
		Created: meta.CreationTimestamp.Time,
	}
	for i := range rules {
		ms, good := translateHTTPMatches(p, ref, fmt.Sprintf("spec.rules[%d]", i), rawRules(i))
		ok = ok && good
		rules[i].matches = ms
		spec.route.Rules = append(spec.route.Rules, authz.HTTPRule{Matches: ms})
	}
	if len(rules) == 0 {
		// Gateway API: a route without rules has no way to match; Linkerd
		// treats the spec's default (one rule matching "/").
		spec.route.Rules = []authz.HTTPRule{{}}
	}
	spec.rules = rules
	return spec, ok
}

type grpcRouteSpec struct {
	ref     ObjectRef
	meta    *metav1.ObjectMeta
	parents []parentRef
	// unsupported and noServer: as for httpRouteSpec.
	unsupported, noServer string
	route                 authz.GRPCRoute
	backends              [][]gatewayv1.BackendRef // per rule, for outbound
}

// outboundRules are the rules the outbound side serves: the route's own,
// none when it has none. (The inbound side reads a GRPCRoute without
// rules as one rule matching every call; Linkerd's outbound index serves
// it without rules, policy-test outbound_api.rs route_with_no_rules.)
func (s *grpcRouteSpec) outboundRules() []authz.GRPCRule {
	if len(s.backends) == 0 {
		return nil
	}
	return s.route.Rules
}

func translateGRPCRoute(p *problems, r *gatewayv1.GRPCRoute) (*grpcRouteSpec, bool) {
	ref := ObjectRef{Kind: "GRPCRoute", Namespace: r.Namespace, Name: r.Name}
	spec := &grpcRouteSpec{ref: ref, meta: &r.ObjectMeta, parents: translateParents(r.Namespace, r.Spec.ParentRefs)}
	hosts, ok := translateHosts(p, ref, r.Spec.Hostnames)
	spec.route = authz.GRPCRoute{
		Meta:    authz.Meta{Group: gatewayv1.GroupName, Kind: "GRPCRoute", Namespace: r.Namespace, Name: r.Name},
		Hosts:   hosts,
		Created: r.CreationTimestamp.Time,
	}
	for i, rule := range r.Spec.Rules {
		var brs []gatewayv1.BackendRef
		for _, b := range rule.BackendRefs {
			brs = append(brs, b.BackendRef)
		}
		spec.backends = append(spec.backends, brs)
		var gr authz.GRPCRule
		for j, m := range rule.Matches {
			f := fmt.Sprintf("spec.rules[%d].matches[%d]", i, j)
			var gm authz.GRPCMatch
			if m.Method != nil {
				if m.Method.Type != nil && *m.Method.Type != gatewayv1.GRPCMethodMatchExact {
					p.errorf(ref, f+".method.type", "only Exact gRPC method matches are supported")
					ok = false
					continue
				}
				if m.Method.Service != nil {
					gm.Service = *m.Method.Service
				}
				if m.Method.Method != nil {
					gm.Method = *m.Method.Method
				}
			}
			for k, h := range m.Headers {
				hf := fmt.Sprintf("%s.headers[%d]", f, k)
				name := textproto.CanonicalMIMEHeaderKey(string(h.Name))
				vm, good := valueMatch(p, ref, hf, name, h.Type == nil || *h.Type == gatewayv1.GRPCHeaderMatchExact,
					h.Type != nil && *h.Type == gatewayv1.GRPCHeaderMatchRegularExpression, h.Value)
				if !good {
					ok = false
					continue
				}
				gm.Headers = append(gm.Headers, vm)
			}
			gr.Matches = append(gr.Matches, gm)
		}
		spec.route.Rules = append(spec.route.Rules, gr)
	}
	if len(r.Spec.Rules) == 0 {
		spec.route.Rules = []authz.GRPCRule{{}}
	}
	return spec, ok
}
