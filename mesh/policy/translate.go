package policy

import (
	"errors"
	"fmt"
	"net/textproto"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// Annotations Weft reads, as Linkerd names them. mesh/inject owns the
// vocabulary; these are the same keys.
const (
	AnnotationDefaultInboundPolicy = vocab.AnnotationDefaultInboundPolicy
	AnnotationOpaquePorts          = vocab.AnnotationOpaquePorts
	AnnotationRequireIdentityPorts = vocab.ConfigPrefix + "proxy-require-identity-inbound-ports"
	AnnotationInject               = vocab.AnnotationInject
)

const policyGroup = "policy.linkerd.io"

// problems collects translation findings.
type problems struct {
	objs *Objects
	list []Problem
}

func (p *problems) add(sev Severity, ref ObjectRef, field, format string, args ...any) {
	p.list = append(p.list, Problem{
		Severity: sev, Object: ref, Location: p.objs.Location(ref), Field: field,
		Message: fmt.Sprintf(format, args...),
	})
}

func (p *problems) errorf(ref ObjectRef, field, format string, args ...any) {
	p.add(SeverityError, ref, field, format, args...)
}

func (p *problems) warnf(ref ObjectRef, field, format string, args ...any) {
	p.add(SeverityWarning, ref, field, format, args...)
}

type nsName struct{ ns, name string }

func metaOf(kind string, m *metav1.ObjectMeta) authz.Meta {
	return authz.Meta{Group: policyGroup, Kind: kind, Namespace: m.Namespace, Name: m.Name}
}

// parsePortSet reads "25,587,3306-3310" into a set.
func parsePortSet(s string) (map[uint16]bool, error) {
	out := map[uint16]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parsePort(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = parsePort(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("port range %q is reversed", part)
			}
		}
		for p := uint32(a); p <= uint32(b); p++ {
			out[uint16(p)] = true
		}
	}
	return out, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	return uint16(n), nil
}

// --- authentications ---

type meshTLSResult struct {
	authn authz.Authentication
	meta  authz.Meta
	err   bool
}

type networkResult struct {
	nets []authz.Network
	meta authz.Meta
	err  bool
}

func parseNetworks(p *problems, ref ObjectRef, field string, cidr string, except []string) (authz.Network, bool) {
	n, err := authz.ParseNetwork(cidr, except...)
	if err != nil {
		p.errorf(ref, field, "%v", err)
		return n, false
	}
	var hb *authz.HostBitsError
	if _, err := authz.ParsePrefix(cidr); errors.As(err, &hb) {
		p.warnf(ref, field+".cidr", "%q has host bits set; it means %s", cidr, hb.Masked)
	}
	return n, true
}

func translateMeshTLS(cfg *Config, p *problems, m *v1alpha1.MeshTLSAuthentication) meshTLSResult {
	ref := ObjectRef{Kind: "MeshTLSAuthentication", Namespace: m.Namespace, Name: m.Name}
	// Until proven valid, the authentication admits no one.
	res := meshTLSResult{meta: metaOf("MeshTLSAuthentication", &m.ObjectMeta), authn: authz.Authentication{Kind: authz.TLSAuthenticated}}
	var patterns []string
	for i, id := range m.Spec.Identities {
		if _, _, err := authz.ParseIdentity(id); err != nil {
			p.errorf(ref, fmt.Sprintf("spec.identities[%d]", i), "%v", err)
			res.err = true
			continue
		}
		patterns = append(patterns, id)
	}
	for i, r := range m.Spec.IdentityRefs {
		field := fmt.Sprintf("spec.identityRefs[%d]", i)
		ns := m.Namespace
		if r.Namespace != nil && *r.Namespace != "" {
			ns = *r.Namespace
		}
		name := ""
		if r.Name != nil {
			name = string(*r.Name)
		}
		switch {
		case isCoreGroup(string(r.Group)) && strings.EqualFold(string(r.Kind), "ServiceAccount"):
			if name == "" {
				p.errorf(ref, field+".name", "a ServiceAccount reference needs a name")
				res.err = true
				continue
			}
			if name == "*" {
				patterns = append(patterns, "*."+cfg.namespaceIdentitySuffix(ns))
				continue
			}
			patterns = append(patterns, cfg.ServiceAccountIdentity(name, ns))
		case isCoreGroup(string(r.Group)) && strings.EqualFold(string(r.Kind), "Namespace"):
			if name == "" {
				name = m.Namespace
			}
			patterns = append(patterns, "*."+cfg.namespaceIdentitySuffix(name))
		default:
			p.errorf(ref, field+".kind", "unsupported identity reference %s (want ServiceAccount or Namespace)", groupKind(string(r.Group), string(r.Kind)))
			res.err = true
		}
	}
	if res.err {
		return res
	}
	a, err := authz.NewAuthentication(patterns...)
	if err != nil {
		p.errorf(ref, "spec", "no identities configured: an empty list never admits anyone")
		res.err = true
		return res
	}
	res.authn = a
	return res
}

func translateNetworkAuthn(p *problems, n *v1alpha1.NetworkAuthentication) networkResult {
	ref := ObjectRef{Kind: "NetworkAuthentication", Namespace: n.Namespace, Name: n.Name}
	res := networkResult{meta: metaOf("NetworkAuthentication", &n.ObjectMeta)}
	if len(n.Spec.Networks) == 0 {
		p.errorf(ref, "spec.networks", "no networks: an empty list never admits anyone")
		res.err = true
		return res
	}
	for i, nw := range n.Spec.Networks {
		net, ok := parseNetworks(p, ref, fmt.Sprintf("spec.networks[%d]", i), nw.Cidr, nw.Except)
		if !ok {
			res.err = true
			continue
		}
		res.nets = append(res.nets, net)
	}
	return res
}

func isCoreGroup(g string) bool { return g == "" || g == "core" }

func groupKind(group, kind string) string {
	if isCoreGroup(group) {
		return kind
	}
	return kind + "." + group
}

// --- servers ---

type serverSpec struct {
	obj      *v1beta3.Server
	ref      ObjectRef
	selector labels.Selector
	port     intstr.IntOrString
	protocol authz.Protocol
	access   *DefaultPolicy
	valid    bool
	// selects counts the workloads the server selects, for lints.
	selects int
}

func translateServer(p *problems, s *v1beta3.Server) *serverSpec {
	ref := ObjectRef{Kind: "Server", Namespace: s.Namespace, Name: s.Name}
	spec := &serverSpec{obj: s, ref: ref, port: s.Spec.Port, valid: true}
	if s.Spec.PodSelector == nil {
		if s.Spec.ExternalWorkloadSelector != nil {
			p.warnf(ref, "spec.externalWorkloadSelector", "external workloads are not supported; the Server is ignored")
		} else {
			p.errorf(ref, "spec.podSelector", "missing podSelector")
		}
		spec.valid = false
		return spec
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.PodSelector)
	if err != nil {
		p.errorf(ref, "spec.podSelector", "%v", err)
		spec.valid = false
		return spec
	}
	spec.selector = sel
	switch s.Spec.Port.Type {
	case intstr.Int:
		if s.Spec.Port.IntVal < 1 || s.Spec.Port.IntVal > 65535 {
			p.errorf(ref, "spec.port", "port %d is out of range 1-65535", s.Spec.Port.IntVal)
			spec.valid = false
		}
	case intstr.String:
		if s.Spec.Port.StrVal == "" {
			p.errorf(ref, "spec.port", "empty port name")
			spec.valid = false
		} else if n, err := strconv.Atoi(s.Spec.Port.StrVal); err == nil {
			// "8080" written as a string means the number.
			spec.port = intstr.FromInt32(int32(n))
			if n < 1 || n > 65535 {
				p.errorf(ref, "spec.port", "port %d is out of range 1-65535", n)
				spec.valid = false
			}
		}
	}
	proto, err := authz.ParseProtocol(string(s.Spec.ProxyProtocol))
	if err != nil {
		p.errorf(ref, "spec.proxyProtocol", "%v", err)
		spec.valid = false
	}
	spec.protocol = proto
	if s.Spec.AccessPolicy != "" {
		d, err := ParseDefaultPolicy(string(s.Spec.AccessPolicy))
		if err != nil {
			p.errorf(ref, "spec.accessPolicy", "%v", err)
			spec.valid = false
		} else if d != DenyAll {
			spec.access = &d
		}
	}
	return spec
}

// --- ServerAuthorization ---

type serverAuthzSpec struct {
	ref      ObjectRef
	name     string
	selector labels.Selector
	authz    authz.Authorization
}

func translateServerAuthz(cfg *Config, p *problems, sa *v1beta1.ServerAuthorization) (*serverAuthzSpec, bool) {
	ref := ObjectRef{Kind: "ServerAuthorization", Namespace: sa.Namespace, Name: sa.Name}
	spec := &serverAuthzSpec{ref: ref}
	ok := true
	switch {
	case sa.Spec.Server.Name != "" && sa.Spec.Server.Selector != nil:
		p.errorf(ref, "spec.server", "set either name or selector, not both")
		ok = false
	case sa.Spec.Server.Name != "":
		spec.name = sa.Spec.Server.Name
	case sa.Spec.Server.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(sa.Spec.Server.Selector)
		if err != nil {
			p.errorf(ref, "spec.server.selector", "%v", err)
			ok = false
		}
		spec.selector = sel
	default:
		p.errorf(ref, "spec.server", "names no server: set name or selector")
		ok = false
	}
	a := authz.Authorization{Meta: metaOf("ServerAuthorization", &sa.ObjectMeta)}
	for i, n := range sa.Spec.Client.Networks {
		net, good := parseNetworks(p, ref, fmt.Sprintf("spec.client.networks[%d]", i), n.Cidr, n.Except)
		if !good {
			ok = false
			continue
		}
		a.Networks = append(a.Networks, net)
	}
	if len(sa.Spec.Client.Networks) == 0 {
		// Linkerd: no networks means the cluster's networks.
		for _, c := range cfg.ClusterNetworks {
			a.Networks = append(a.Networks, authz.Network{Net: c})
		}
	}
	switch {
	case sa.Spec.Client.Unauthenticated && sa.Spec.Client.MeshTLS != nil:
		// Ambiguous, and the broader reading would grant more than the
		// meshTLS part says: refused, as Linkerd's admission does.
		p.errorf(ref, "spec.client.unauthenticated", "must be false when meshTLS is set")
		ok = false
	case sa.Spec.Client.Unauthenticated:
		a.Authentication = authz.Authentication{Kind: authz.Unauthenticated}
	case sa.Spec.Client.MeshTLS != nil:
		m := sa.Spec.Client.MeshTLS
		if m.UnauthenticatedTLS && (len(m.Identities) > 0 || len(m.ServiceAccounts) > 0) {
			p.errorf(ref, "spec.client.meshTLS.unauthenticatedTLS", "must be false when identities or serviceAccounts are set")
			ok = false
			break
		}
		if m.UnauthenticatedTLS {
			a.Authentication = authz.Authentication{Kind: authz.TLSUnauthenticated}
			break
		}
		var patterns []string
		for i, id := range m.Identities {
			if _, _, err := authz.ParseIdentity(id); err != nil {
				p.errorf(ref, fmt.Sprintf("spec.client.meshTLS.identities[%d]", i), "%v", err)
				ok = false
				continue
			}
			patterns = append(patterns, id)
		}
		for i, s := range m.ServiceAccounts {
			if s.Name == "" {
				p.errorf(ref, fmt.Sprintf("spec.client.meshTLS.serviceAccounts[%d].name", i), "empty service account name")
				ok = false
				continue
			}
			ns := s.Namespace
			if ns == "" {
				ns = sa.Namespace
			}
			patterns = append(patterns, cfg.ServiceAccountIdentity(s.Name, ns))
		}
		if !ok {
			break
		}
		authn, err := authz.NewAuthentication(patterns...)
		if err != nil {
			p.errorf(ref, "spec.client.meshTLS", "authorizes no clients: list identities or serviceAccounts, or set unauthenticatedTLS")
			ok = false
		}
		a.Authentication = authn
	default:
		p.errorf(ref, "spec.client", "no client authentication configured: set unauthenticated or meshTLS")
		ok = false
	}
	spec.authz = a
	return spec, ok
}

// --- AuthorizationPolicy ---

type targetKind uint8

const (
	targetServer targetKind = iota
	targetNamespace
	targetHTTPRoute
	targetGRPCRoute
)

type apSpec struct {
	ref    ObjectRef
	target targetKind
	// targetGroup and targetName name a Server or route.
	targetGroup string
	targetName  string
	authz       authz.Authorization
	usable      bool // false when a reference is missing or invalid
}

func translateAuthorizationPolicy(cfg *Config, p *problems, ap *v1alpha1.AuthorizationPolicy,
	meshTLS map[nsName]meshTLSResult, nets map[nsName]networkResult) (*apSpec, bool) {

	ref := ObjectRef{Kind: "AuthorizationPolicy", Namespace: ap.Namespace, Name: ap.Name}
	spec := &apSpec{ref: ref, usable: true}
	tr := ap.Spec.TargetRef
	g, k := string(tr.Group), string(tr.Kind)
	spec.targetGroup, spec.targetName = g, string(tr.Name)
	switch {
	case strings.EqualFold(g, policyGroup) && strings.EqualFold(k, "Server"):
		spec.target = targetServer
	case isCoreGroup(g) && strings.EqualFold(k, "Namespace"):
		spec.target = targetNamespace
		if string(tr.Name) != ap.Namespace {
			p.warnf(ref, "spec.targetRef.name", "targets Namespace %q but policies only apply in their own namespace %q", tr.Name, ap.Namespace)
		}
	case (strings.EqualFold(g, policyGroup) || strings.EqualFold(g, gatewayv1.GroupName)) && strings.EqualFold(k, "HTTPRoute"):
		spec.target = targetHTTPRoute
		spec.targetGroup = strings.ToLower(g)
	case strings.EqualFold(g, gatewayv1.GroupName) && strings.EqualFold(k, "GRPCRoute"):
		spec.target = targetGRPCRoute
		spec.targetGroup = strings.ToLower(g)
	default:
		p.errorf(ref, "spec.targetRef", "unsupported target %s (want Server, HTTPRoute, GRPCRoute or Namespace)", groupKind(g, k))
		return spec, false
	}
	if len(ap.Spec.RequiredAuthenticationRefs) == 0 {
		p.errorf(ref, "spec.requiredAuthenticationRefs", "at least one authentication reference is required; an empty list never means everyone")
		return spec, false
	}
	a := authz.Authorization{Meta: metaOf("AuthorizationPolicy", &ap.ObjectMeta)}
	var identities *authz.Authentication
	var networks []authz.Network
	haveNets := false
	for i, r := range ap.Spec.RequiredAuthenticationRefs {
		field := fmt.Sprintf("spec.requiredAuthenticationRefs[%d]", i)
		ns := ap.Namespace
		if r.Namespace != nil && *r.Namespace != "" {
			ns = *r.Namespace
		}
		key := nsName{ns, string(r.Name)}
		rg, rk := string(r.Group), string(r.Kind)
		switch {
		case strings.EqualFold(rg, policyGroup) && strings.EqualFold(rk, "MeshTLSAuthentication"):
			if identities != nil {
				p.errorf(ref, field, "a policy may require only one MeshTLSAuthentication or ServiceAccount")
				return spec, false
			}
			m, found := meshTLS[key]
			if !found {
				p.warnf(ref, field, "MeshTLSAuthentication %s/%s not found; the policy admits no one until it exists", ns, r.Name)
				spec.usable = false
				identities = &authz.Authentication{Kind: authz.TLSAuthenticated}
				continue
			}
			if m.err {
				p.warnf(ref, field, "MeshTLSAuthentication %s/%s is invalid; the policy admits no one", ns, r.Name)
				spec.usable = false
			}
			authn := m.authn
			identities = &authn
			a.Sources = append(a.Sources, m.meta)
		case strings.EqualFold(rg, policyGroup) && strings.EqualFold(rk, "NetworkAuthentication"):
			if haveNets {
				p.errorf(ref, field, "a policy may require only one NetworkAuthentication")
				return spec, false
			}
			haveNets = true
			n, found := nets[key]
			if !found {
				p.warnf(ref, field, "NetworkAuthentication %s/%s not found; the policy admits no one until it exists", ns, r.Name)
				spec.usable = false
				continue
			}
			if n.err {
				p.warnf(ref, field, "NetworkAuthentication %s/%s is invalid; the policy admits no one", ns, r.Name)
				spec.usable = false
			}
			networks = n.nets
			a.Sources = append(a.Sources, n.meta)
		case isCoreGroup(rg) && strings.EqualFold(rk, "ServiceAccount"):
			if identities != nil {
				p.errorf(ref, field, "a policy may require only one MeshTLSAuthentication or ServiceAccount")
				return spec, false
			}
			if r.Name == "" {
				p.errorf(ref, field+".name", "empty service account name")
				return spec, false
			}
			authn := authz.Authentication{Kind: authz.TLSAuthenticated, Identities: []string{cfg.ServiceAccountIdentity(string(r.Name), ns)}}
			identities = &authn
			a.Sources = append(a.Sources, authz.Meta{Kind: "ServiceAccount", Namespace: ns, Name: string(r.Name)})
		default:
			p.errorf(ref, field+".kind", "unsupported authentication %s (want MeshTLSAuthentication, NetworkAuthentication or ServiceAccount)", groupKind(rg, rk))
			return spec, false
		}
	}
	if identities != nil {
		a.Authentication = *identities
	} else {
		a.Authentication = authz.Authentication{Kind: authz.Unauthenticated}
	}
	if haveNets {
		a.Networks = networks
	} else {
		a.Networks = authz.AllNetworks()
	}
	spec.authz = a
	return spec, true
}

// --- routes ---

type parentRef struct {
	group, kind, namespace, name string
	port                         int32
}

type httpRouteSpec struct {
	ref     ObjectRef
	group   string // policy.linkerd.io or gateway.networking.k8s.io
	meta    *metav1.ObjectMeta
	parents []parentRef
	route   authz.HTTPRoute // without authorizations
	// rules kept for outbound translation
	rules []routeRule
	hosts []string
}

type routeRule struct {
	matches  []authz.HTTPMatch
	backends []gatewayv1.HTTPBackendRef
	timeouts *gatewayv1.HTTPRouteTimeouts
}

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
			r.namespace = string(*pr.Namespace)
		}
		if pr.Port != nil {
			r.port = int32(*pr.Port)
		}
		out = append(out, r)
	}
	return out
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
	ref      ObjectRef
	meta     *metav1.ObjectMeta
	parents  []parentRef
	route    authz.GRPCRoute
	backends [][]gatewayv1.BackendRef // per rule, for outbound
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

// --- workloads ---

// containerPorts returns the named and numbered TCP ports a workload
// declares (containers and sidecar init containers).
func containerPorts(w *Workload) (names map[string][]uint16, numbers map[uint16]string) {
	names = map[string][]uint16{}
	numbers = map[uint16]string{}
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
					continue
				}
				if p.ContainerPort < 1 || p.ContainerPort > 65535 {
					continue
				}
				n := uint16(p.ContainerPort)
				numbers[n] = p.Name
				if p.Name != "" {
					names[p.Name] = append(names[p.Name], n)
				}
			}
		}
	}
	add(w.Containers, false)
	add(w.InitContainers, true)
	return names, numbers
}

// probePaths returns the HTTP probe paths of a workload by port.
func probePaths(w *Workload) map[uint16][]string {
	out := map[uint16][]string{}
	for _, c := range w.Containers {
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if pr == nil || pr.HTTPGet == nil {
				continue
			}
			var port uint16
			switch pr.HTTPGet.Port.Type {
			case intstr.Int:
				if pr.HTTPGet.Port.IntVal > 0 && pr.HTTPGet.Port.IntVal <= 65535 {
					port = uint16(pr.HTTPGet.Port.IntVal)
				}
			case intstr.String:
				for _, cp := range c.Ports {
					if cp.Name == pr.HTTPGet.Port.StrVal {
						port = uint16(cp.ContainerPort)
					}
				}
			}
			if port == 0 {
				continue
			}
			path := pr.HTTPGet.Path
			if path == "" {
				path = "/"
			}
			raw, _, err := pathnorm.SplitTarget(path)
			if err != nil {
				continue
			}
			norm, err := pathnorm.Normalize(raw)
			if err != nil {
				continue
			}
			out[port] = append(out[port], norm)
		}
	}
	for port, ps := range out {
		sort.Strings(ps)
		out[port] = compactStrings(ps)
	}
	return out
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// probeRoute is the route that authorizes kubelet probes.
func probeRoute(cfg *Config, paths []string) (authz.HTTPRoute, bool) {
	if len(paths) == 0 || len(cfg.ProbeNetworks) == 0 {
		return authz.HTTPRoute{}, false
	}
	r := authz.HTTPRoute{Meta: authz.DefaultMeta("probe")}
	var rule authz.HTTPRule
	for _, p := range paths {
		rule.Matches = append(rule.Matches, authz.HTTPMatch{Method: "GET", Path: &authz.PathMatch{Kind: authz.PathExact, Value: p}})
	}
	r.Rules = []authz.HTTPRule{rule}
	a := authz.Authorization{Meta: authz.DefaultMeta("probe"), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}
	for _, n := range cfg.ProbeNetworks {
		a.Networks = append(a.Networks, authz.Network{Net: n})
	}
	r.Authorizations = []authz.Authorization{a}
	return r, true
}

// defaultRoutes are the routes of a server without HTTPRoutes.
func defaultRoutes(cfg *Config, paths []string) []authz.HTTPRoute {
	routes := []authz.HTTPRoute{authz.DefaultHTTPRoute()}
	if pr, ok := probeRoute(cfg, paths); ok {
		routes = append(routes, pr)
	}
	return routes
}
