package webhook

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	policyv1alpha1 "github.com/weftmesh/weft/apis/policy/v1alpha1"
	policyv1beta1 "github.com/weftmesh/weft/apis/policy/v1beta1"
	policyv1beta2 "github.com/weftmesh/weft/apis/policy/v1beta2"
	policyv1beta3 "github.com/weftmesh/weft/apis/policy/v1beta3"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/inject"
)

// Validate checks a decoded ServiceProfile, policy.linkerd.io resource or
// Gateway API route beyond what its schema can express, and returns every
// invalid field. Objects of other kinds yield nil. It is a pure function:
// checks that need other objects (such as two Servers selecting the same
// port) are not made here.
func Validate(obj runtime.Object) field.ErrorList {
	spec := field.NewPath("spec")
	switch o := obj.(type) {
	case *spv1alpha2.ServiceProfile:
		return validateServiceProfile(o)
	case *policyv1beta1.Server:
		return validateServer(spec, o.Spec.PodSelector, nil, o.Spec.Port, string(o.Spec.ProxyProtocol), "", true)
	case *policyv1beta2.Server:
		return validateServer(spec, o.Spec.PodSelector, o.Spec.ExternalWorkloadSelector, o.Spec.Port, string(o.Spec.ProxyProtocol), "", false)
	case *policyv1beta3.Server:
		return validateServer(spec, o.Spec.PodSelector, o.Spec.ExternalWorkloadSelector, o.Spec.Port, string(o.Spec.ProxyProtocol), string(o.Spec.AccessPolicy), false)
	case *policyv1beta1.ServerAuthorization:
		return validateServerAuthorization(spec, &o.Spec)
	case *policyv1alpha1.AuthorizationPolicy:
		return validateAuthorizationPolicy(spec, o.Namespace, &o.Spec)
	case *policyv1alpha1.MeshTLSAuthentication:
		return validateMeshTLSAuthentication(spec, &o.Spec)
	case *policyv1alpha1.NetworkAuthentication:
		return validateNetworkAuthentication(spec, &o.Spec)
	case *policyv1beta3.HTTPRoute:
		return validatePolicyHTTPRoute(spec, &o.Spec)
	case *gatewayv1.HTTPRoute:
		return validateGatewayHTTPRoute(spec, &o.Spec)
	case *gatewayv1.GRPCRoute:
		return validateGRPCRoute(spec, &o.Spec)
	}
	return nil
}

// --- ServiceProfile ---

func validateServiceProfile(sp *spv1alpha2.ServiceProfile) field.ErrorList {
	var errs field.ErrorList
	if msgs := validation.IsDNS1123Subdomain(sp.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), sp.Name,
			"must be the service's fully qualified DNS name (such as web.shop.svc.cluster.local): "+strings.Join(msgs, "; ")))
	}
	spec := field.NewPath("spec")
	for i, r := range sp.Spec.Routes {
		p := spec.Child("routes").Index(i)
		if strings.TrimSpace(r.Name) == "" {
			errs = append(errs, field.Required(p.Child("name"), "every route needs a name"))
		}
		if r.Condition == nil {
			errs = append(errs, field.Required(p.Child("condition"), "every route needs a condition"))
		} else {
			errs = append(errs, validateRequestMatch(p.Child("condition"), r.Condition, 0)...)
		}
		for j, rc := range r.ResponseClasses {
			rp := p.Child("responseClasses").Index(j)
			if rc.Condition == nil {
				errs = append(errs, field.Required(rp.Child("condition"), "every response class needs a condition"))
				continue
			}
			errs = append(errs, validateResponseMatch(rp.Child("condition"), rc.Condition, 0)...)
		}
		if r.Timeout != "" {
			if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
				errs = append(errs, field.Invalid(p.Child("timeout"), r.Timeout, "must be a positive duration such as 300ms or 10s"))
			}
		}
	}
	if b := sp.Spec.RetryBudget; b != nil {
		p := spec.Child("retryBudget")
		if b.RetryRatio < 0 || math.IsNaN(float64(b.RetryRatio)) || math.IsInf(float64(b.RetryRatio), 0) {
			errs = append(errs, field.Invalid(p.Child("retryRatio"), b.RetryRatio, "must be a non-negative number"))
		}
		if d, err := time.ParseDuration(b.TTL); err != nil || d <= 0 {
			errs = append(errs, field.Invalid(p.Child("ttl"), b.TTL, "must be a positive duration such as 10s"))
		}
	}
	for i, d := range sp.Spec.DstOverrides {
		p := spec.Child("dstOverrides").Index(i)
		if err := checkAuthority(d.Authority); err != nil {
			errs = append(errs, field.Invalid(p.Child("authority"), d.Authority, err.Error()))
		}
		if d.Weight.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("weight"), d.Weight.String(), "must not be negative"))
		}
	}
	for i, s := range sp.Spec.OpaquePorts {
		if _, err := inject.ParsePorts(s, nil); err != nil {
			errs = append(errs, field.Invalid(spec.Child("opaquePorts").Index(i), s, err.Error()))
		}
	}
	return errs
}

// maxConditionDepth bounds the nesting of all/any/not, so a hostile
// profile cannot make validation (or the proxy) recurse without end.
const maxConditionDepth = 16

var methodRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func validateRequestMatch(p *field.Path, m *spv1alpha2.RequestMatch, depth int) field.ErrorList {
	if depth > maxConditionDepth {
		return field.ErrorList{field.Invalid(p, "(nested)", fmt.Sprintf("conditions nest deeper than %d levels", maxConditionDepth))}
	}
	var errs field.ErrorList
	if len(m.All) == 0 && len(m.Any) == 0 && m.Not == nil && m.PathRegex == "" && m.Method == "" {
		errs = append(errs, field.Required(p, "a condition must set at least one of all, any, not, pathRegex, method"))
	}
	if m.PathRegex != "" {
		if _, err := regexp.Compile("^(?:" + m.PathRegex + ")$"); err != nil {
			errs = append(errs, field.Invalid(p.Child("pathRegex"), m.PathRegex, "not a valid regular expression: "+err.Error()))
		}
	}
	if m.Method != "" && !methodRE.MatchString(m.Method) {
		errs = append(errs, field.Invalid(p.Child("method"), m.Method, "not an HTTP method"))
	}
	for i := range m.All {
		errs = append(errs, validateRequestMatch(p.Child("all").Index(i), &m.All[i], depth+1)...)
	}
	for i := range m.Any {
		errs = append(errs, validateRequestMatch(p.Child("any").Index(i), &m.Any[i], depth+1)...)
	}
	if m.Not != nil {
		errs = append(errs, validateRequestMatch(p.Child("not"), m.Not, depth+1)...)
	}
	return errs
}

func validateResponseMatch(p *field.Path, m *spv1alpha2.ResponseMatch, depth int) field.ErrorList {
	if depth > maxConditionDepth {
		return field.ErrorList{field.Invalid(p, "(nested)", fmt.Sprintf("conditions nest deeper than %d levels", maxConditionDepth))}
	}
	var errs field.ErrorList
	if len(m.All) == 0 && len(m.Any) == 0 && m.Not == nil && m.Status == nil {
		errs = append(errs, field.Required(p, "a condition must set at least one of all, any, not, status"))
	}
	if s := m.Status; s != nil {
		sp := p.Child("status")
		if s.Min == 0 && s.Max == 0 {
			errs = append(errs, field.Required(sp, "a status range needs min, max or both"))
		}
		for _, b := range []struct {
			name string
			v    uint32
		}{{"min", s.Min}, {"max", s.Max}} {
			if b.v != 0 && (b.v < 100 || b.v > 599) {
				errs = append(errs, field.Invalid(sp.Child(b.name), b.v, "not an HTTP status code (100-599)"))
			}
		}
		if s.Min != 0 && s.Max != 0 && s.Min > s.Max {
			errs = append(errs, field.Invalid(sp, fmt.Sprintf("%d-%d", s.Min, s.Max), "min is greater than max"))
		}
	}
	for i := range m.All {
		errs = append(errs, validateResponseMatch(p.Child("all").Index(i), &m.All[i], depth+1)...)
	}
	for i := range m.Any {
		errs = append(errs, validateResponseMatch(p.Child("any").Index(i), &m.Any[i], depth+1)...)
	}
	if m.Not != nil {
		errs = append(errs, validateResponseMatch(p.Child("not"), m.Not, depth+1)...)
	}
	return errs
}

// checkAuthority accepts host or host:port with a DNS host name or an IP.
func checkAuthority(a string) error {
	if a == "" {
		return fmt.Errorf("must not be empty")
	}
	host := a
	if ap, err := netip.ParseAddrPort(a); err == nil && ap.Port() != 0 {
		return nil
	}
	if h, port, ok := strings.Cut(a, ":"); ok {
		if _, err := parsePortNumber(port); err != nil {
			return err
		}
		host = h
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	if msgs := validation.IsDNS1123Subdomain(strings.TrimSuffix(host, ".")); len(msgs) > 0 {
		return fmt.Errorf("host %q is not a DNS name: %s", host, strings.Join(msgs, "; "))
	}
	return nil
}

func parsePortNumber(s string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || fmt.Sprint(n) != s || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number in 1-65535", s)
	}
	return n, nil
}

// --- Server ---

func validateServer(spec *field.Path, pods, external *metav1.LabelSelector, port intstr.IntOrString, protocol, access string, podsRequired bool) field.ErrorList {
	var errs field.ErrorList
	switch {
	case pods == nil && external == nil:
		if podsRequired {
			errs = append(errs, field.Required(spec.Child("podSelector"), "a Server must select pods"))
		} else {
			errs = append(errs, field.Required(spec.Child("podSelector"), "exactly one of podSelector and externalWorkloadSelector must be set"))
		}
	case pods != nil && external != nil:
		errs = append(errs, field.Forbidden(spec.Child("externalWorkloadSelector"), "podSelector and externalWorkloadSelector are mutually exclusive"))
	}
	if pods != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(pods, metav1validation.LabelSelectorValidationOptions{}, spec.Child("podSelector"))...)
	}
	if external != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(external, metav1validation.LabelSelectorValidationOptions{}, spec.Child("externalWorkloadSelector"))...)
	}
	errs = append(errs, validatePort(spec.Child("port"), port)...)
	switch protocol {
	case "", "unknown", "HTTP/1", "HTTP/2", "gRPC", "opaque", "TLS":
	default:
		errs = append(errs, field.NotSupported(spec.Child("proxyProtocol"), protocol, []string{"unknown", "HTTP/1", "HTTP/2", "gRPC", "opaque", "TLS"}))
	}
	switch access {
	case "", vocab.PolicyAllUnauthenticated, vocab.PolicyAllAuthenticated, vocab.PolicyClusterAuthenticated,
		vocab.PolicyClusterUnauthenticated, vocab.PolicyDeny, vocab.PolicyAudit:
	default:
		errs = append(errs, field.NotSupported(spec.Child("accessPolicy"), access, []string{
			vocab.PolicyAllUnauthenticated, vocab.PolicyAllAuthenticated, vocab.PolicyClusterAuthenticated,
			vocab.PolicyClusterUnauthenticated, vocab.PolicyDeny, vocab.PolicyAudit}))
	}
	return errs
}

func validatePort(p *field.Path, port intstr.IntOrString) field.ErrorList {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return field.ErrorList{field.Invalid(p, port.IntVal, "must be a port number in 1-65535")}
		}
		return nil
	}
	if msgs := validation.IsValidPortName(port.StrVal); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(p, port.StrVal, "must be a port number or a container port name: "+strings.Join(msgs, "; "))}
	}
	return nil
}

// --- authorizations and authentications ---

func validateServerAuthorization(spec *field.Path, s *policyv1beta1.ServerAuthorizationSpec) field.ErrorList {
	var errs field.ErrorList
	sp := spec.Child("server")
	switch {
	case s.Server.Name == "" && s.Server.Selector == nil:
		errs = append(errs, field.Required(sp, "exactly one of name and selector must be set"))
	case s.Server.Name != "" && s.Server.Selector != nil:
		errs = append(errs, field.Forbidden(sp.Child("selector"), "name and selector are mutually exclusive"))
	}
	if s.Server.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Server.Selector, metav1validation.LabelSelectorValidationOptions{}, sp.Child("selector"))...)
	}
	cp := spec.Child("client")
	if s.Client.MeshTLS == nil && !s.Client.Unauthenticated {
		errs = append(errs, field.Required(cp, "either meshTLS must be set or unauthenticated must be true"))
	}
	if m := s.Client.MeshTLS; m != nil {
		mp := cp.Child("meshTLS")
		if s.Client.Unauthenticated {
			errs = append(errs, field.Forbidden(cp.Child("unauthenticated"), "must be false when meshTLS is set"))
		}
		if m.UnauthenticatedTLS && (len(m.Identities) > 0 || len(m.ServiceAccounts) > 0) {
			errs = append(errs, field.Forbidden(mp.Child("unauthenticatedTLS"), "must be false when identities or serviceAccounts are set"))
		}
		for i, id := range m.Identities {
			if err := checkIdentity(id); err != nil {
				errs = append(errs, field.Invalid(mp.Child("identities").Index(i), id, err.Error()))
			}
		}
		for i, sa := range m.ServiceAccounts {
			sap := mp.Child("serviceAccounts").Index(i)
			if msgs := validation.IsDNS1123Subdomain(sa.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(sap.Child("name"), sa.Name, strings.Join(msgs, "; ")))
			}
			if sa.Namespace != "" && !isDNSLabel(sa.Namespace) {
				errs = append(errs, field.Invalid(sap.Child("namespace"), sa.Namespace, "not a namespace name"))
			}
		}
	}
	for i, n := range s.Client.Networks {
		errs = append(errs, validateNetwork(cp.Child("networks").Index(i), n.Cidr, n.Except)...)
	}
	return errs
}

func isDNSLabel(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }

// checkIdentity accepts "*" or a DNS-like identity whose first label may
// be "*" ("*.shop.serviceaccount.identity.weft.cluster.local").
func checkIdentity(id string) error {
	if id == "*" {
		return nil
	}
	if id == "" {
		return fmt.Errorf("must not be empty")
	}
	labels := strings.Split(id, ".")
	for i, l := range labels {
		if i == 0 && l == "*" {
			continue
		}
		if !isDNSLabel(strings.ToLower(l)) {
			return fmt.Errorf("label %q is not a DNS label (a wildcard is only allowed as the whole first label)", l)
		}
	}
	return nil
}

func validateNetwork(p *field.Path, cidr string, except []string) field.ErrorList {
	var errs field.ErrorList
	net, err := parseNet(cidr)
	if err != nil {
		return field.ErrorList{field.Invalid(p.Child("cidr"), cidr, err.Error())}
	}
	for i, e := range except {
		ep := p.Child("except").Index(i)
		ex, err := parseNet(e)
		if err != nil {
			errs = append(errs, field.Invalid(ep, e, err.Error()))
			continue
		}
		switch {
		case ex.Addr().Is4() != net.Addr().Is4():
			errs = append(errs, field.Invalid(ep, e, fmt.Sprintf("is not in the address family of %s", cidr)))
		case ex.Bits() <= net.Bits() && ex.Contains(net.Addr()):
			errs = append(errs, field.Invalid(ep, e, fmt.Sprintf("negates all of %s", cidr)))
		case !net.Contains(ex.Addr()):
			errs = append(errs, field.Invalid(ep, e, fmt.Sprintf("is not inside %s", cidr)))
		}
	}
	return errs
}

// parseNet accepts a CIDR or a single address; host bits must be zero.
func parseNet(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("zoned addresses are not networks")
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not a CIDR or IP address")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("host bits are set (did you mean %s?)", p.Masked())
	}
	return p, nil
}

func kindIs(group gatewayv1.Group, kind gatewayv1.Kind, wantGroup, wantKind string) bool {
	return strings.EqualFold(string(group), wantGroup) && strings.EqualFold(string(kind), wantKind)
}

func validateAuthorizationPolicy(spec *field.Path, ns string, s *policyv1alpha1.AuthorizationPolicySpec) field.ErrorList {
	var errs field.ErrorList
	t := s.TargetRef
	tp := spec.Child("targetRef")
	switch {
	case kindIs(t.Group, t.Kind, policyv1beta3.GroupName, "Server"),
		kindIs(t.Group, t.Kind, policyv1beta3.GroupName, "HTTPRoute"),
		kindIs(t.Group, t.Kind, gatewayv1.GroupName, "HTTPRoute"),
		kindIs(t.Group, t.Kind, gatewayv1.GroupName, "GRPCRoute"):
	case kindIs(t.Group, t.Kind, "", "Namespace"):
		if ns != "" && string(t.Name) != ns {
			errs = append(errs, field.Invalid(tp.Child("name"), t.Name, "an AuthorizationPolicy can only target its own namespace"))
		}
	default:
		errs = append(errs, field.NotSupported(tp.Child("kind"), qualifiedKind(t.Group, t.Kind),
			[]string{"policy.linkerd.io/Server", "policy.linkerd.io/HTTPRoute", "gateway.networking.k8s.io/HTTPRoute", "gateway.networking.k8s.io/GRPCRoute", "Namespace"}))
	}
	if t.Name == "" {
		errs = append(errs, field.Required(tp.Child("name"), ""))
	}
	var mtls, sa, network int
	rp := spec.Child("requiredAuthenticationRefs")
	for i, r := range s.RequiredAuthenticationRefs {
		p := rp.Index(i)
		switch {
		case kindIs(r.Group, r.Kind, policyv1alpha1.GroupName, "MeshTLSAuthentication"):
			mtls++
			if mtls > 1 {
				errs = append(errs, field.Duplicate(p, "only one MeshTLSAuthentication may be referenced"))
			}
		case kindIs(r.Group, r.Kind, "", "ServiceAccount"):
			sa++
			if sa > 1 {
				errs = append(errs, field.Duplicate(p, "only one ServiceAccount may be referenced"))
			}
		case kindIs(r.Group, r.Kind, policyv1alpha1.GroupName, "NetworkAuthentication"):
			network++
			if network > 1 {
				errs = append(errs, field.Duplicate(p, "only one NetworkAuthentication may be referenced"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), qualifiedKind(r.Group, r.Kind),
				[]string{"policy.linkerd.io/MeshTLSAuthentication", "policy.linkerd.io/NetworkAuthentication", "ServiceAccount"}))
		}
		if r.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
	}
	if mtls > 0 && sa > 0 {
		errs = append(errs, field.Forbidden(rp, "a MeshTLSAuthentication and a ServiceAccount cannot be referenced together"))
	}
	return errs
}

func qualifiedKind(g gatewayv1.Group, k gatewayv1.Kind) string {
	if g == "" || g == "core" {
		return string(k)
	}
	return string(g) + "/" + string(k)
}

func validateMeshTLSAuthentication(spec *field.Path, s *policyv1alpha1.MeshTLSAuthenticationSpec) field.ErrorList {
	var errs field.ErrorList
	switch {
	case len(s.Identities) == 0 && len(s.IdentityRefs) == 0:
		errs = append(errs, field.Required(spec.Child("identities"), "exactly one of identities and identityRefs must be set"))
	case len(s.Identities) > 0 && len(s.IdentityRefs) > 0:
		errs = append(errs, field.Forbidden(spec.Child("identityRefs"), "identities and identityRefs are mutually exclusive"))
	}
	for i, id := range s.Identities {
		if err := checkIdentity(id); err != nil {
			errs = append(errs, field.Invalid(spec.Child("identities").Index(i), id, err.Error()))
		}
	}
	for i, r := range s.IdentityRefs {
		p := spec.Child("identityRefs").Index(i)
		switch {
		case kindIs(r.Group, r.Kind, "", "ServiceAccount"):
			if r.Name == nil || *r.Name == "" {
				errs = append(errs, field.Required(p.Child("name"), "a ServiceAccount reference needs a name"))
			}
		case kindIs(r.Group, r.Kind, "", "Namespace"):
			if r.Namespace != nil {
				errs = append(errs, field.Forbidden(p.Child("namespace"), "a Namespace is cluster-scoped and has no namespace"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), qualifiedKind(r.Group, r.Kind), []string{"ServiceAccount", "Namespace"}))
		}
	}
	return errs
}

func validateNetworkAuthentication(spec *field.Path, s *policyv1alpha1.NetworkAuthenticationSpec) field.ErrorList {
	if len(s.Networks) == 0 {
		return field.ErrorList{field.Required(spec.Child("networks"), "at least one network must be listed")}
	}
	var errs field.ErrorList
	for i, n := range s.Networks {
		errs = append(errs, validateNetwork(spec.Child("networks").Index(i), n.Cidr, n.Except)...)
	}
	return errs
}

// --- routes ---

func validatePolicyHTTPRoute(spec *field.Path, s *policyv1beta3.HTTPRouteSpec) field.ErrorList {
	var errs field.ErrorList
	if len(s.ParentRefs) == 0 {
		errs = append(errs, field.Required(spec.Child("parentRefs"), "a route must name at least one parent"))
	}
	for i, r := range s.Rules {
		p := spec.Child("rules").Index(i)
		for j := range r.Matches {
			errs = append(errs, validateHTTPMatch(p.Child("matches").Index(j), &r.Matches[j])...)
		}
		for j, f := range r.Filters {
			errs = append(errs, validatePolicyFilter(p.Child("filters").Index(j), f)...)
		}
		errs = append(errs, validateTimeouts(p.Child("timeouts"), r.Timeouts)...)
	}
	return errs
}

func validateGatewayHTTPRoute(spec *field.Path, s *gatewayv1.HTTPRouteSpec) field.ErrorList {
	var errs field.ErrorList
	if len(s.ParentRefs) == 0 {
		errs = append(errs, field.Required(spec.Child("parentRefs"), "a route must name at least one parent"))
	}
	for i, r := range s.Rules {
		p := spec.Child("rules").Index(i)
		for j := range r.Matches {
			errs = append(errs, validateHTTPMatch(p.Child("matches").Index(j), &r.Matches[j])...)
		}
		for j, f := range r.Filters {
			fp := p.Child("filters").Index(j)
			errs = append(errs, validateHeaderFilter(fp.Child("requestHeaderModifier"), f.RequestHeaderModifier)...)
			errs = append(errs, validateHeaderFilter(fp.Child("responseHeaderModifier"), f.ResponseHeaderModifier)...)
			errs = append(errs, validateRedirect(fp.Child("requestRedirect"), f.RequestRedirect)...)
		}
		for j, b := range r.BackendRefs {
			errs = append(errs, validateServiceBackend(p.Child("backendRefs").Index(j), b.BackendObjectReference)...)
		}
		errs = append(errs, validateTimeouts(p.Child("timeouts"), r.Timeouts)...)
	}
	return errs
}

func validateGRPCRoute(spec *field.Path, s *gatewayv1.GRPCRouteSpec) field.ErrorList {
	var errs field.ErrorList
	if len(s.ParentRefs) == 0 {
		errs = append(errs, field.Required(spec.Child("parentRefs"), "a route must name at least one parent"))
	}
	for i, r := range s.Rules {
		p := spec.Child("rules").Index(i)
		for j, m := range r.Matches {
			mp := p.Child("matches").Index(j)
			if mm := m.Method; mm != nil {
				if (mm.Service == nil || *mm.Service == "") && (mm.Method == nil || *mm.Method == "") {
					errs = append(errs, field.Required(mp.Child("method"), "at least one of service and method must be non-empty"))
				}
				if mm.Type != nil && *mm.Type == gatewayv1.GRPCMethodMatchRegularExpression {
					for _, s := range []*string{mm.Service, mm.Method} {
						if s != nil {
							if _, err := regexp.Compile(*s); err != nil {
								errs = append(errs, field.Invalid(mp.Child("method"), *s, "not a valid regular expression"))
							}
						}
					}
				}
			}
			for k, h := range m.Headers {
				hp := mp.Child("headers").Index(k)
				if !methodRE.MatchString(string(h.Name)) {
					errs = append(errs, field.Invalid(hp.Child("name"), h.Name, "not a header name"))
				}
				if h.Type != nil && *h.Type == gatewayv1.GRPCHeaderMatchRegularExpression {
					if _, err := regexp.Compile(h.Value); err != nil {
						errs = append(errs, field.Invalid(hp.Child("value"), h.Value, "not a valid regular expression"))
					}
				}
			}
		}
		for j, b := range r.BackendRefs {
			errs = append(errs, validateServiceBackend(p.Child("backendRefs").Index(j), b.BackendObjectReference)...)
		}
	}
	return errs
}

func validateHTTPMatch(p *field.Path, m *gatewayv1.HTTPRouteMatch) field.ErrorList {
	var errs field.ErrorList
	if pm := m.Path; pm != nil && pm.Value != nil {
		pp := p.Child("path", "value")
		v := *pm.Value
		t := gatewayv1.PathMatchPathPrefix
		if pm.Type != nil {
			t = *pm.Type
		}
		switch t {
		case gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix:
			if !strings.HasPrefix(v, "/") {
				errs = append(errs, field.Invalid(pp, v, "must start with /"))
			}
		case gatewayv1.PathMatchRegularExpression:
			if _, err := regexp.Compile(v); err != nil {
				errs = append(errs, field.Invalid(pp, v, "not a valid regular expression"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("path", "type"), t, []string{"Exact", "PathPrefix", "RegularExpression"}))
		}
	}
	for i, h := range m.Headers {
		hp := p.Child("headers").Index(i)
		if !methodRE.MatchString(string(h.Name)) {
			errs = append(errs, field.Invalid(hp.Child("name"), h.Name, "not a header name"))
		}
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			if _, err := regexp.Compile(h.Value); err != nil {
				errs = append(errs, field.Invalid(hp.Child("value"), h.Value, "not a valid regular expression"))
			}
		}
	}
	for i, q := range m.QueryParams {
		qp := p.Child("queryParams").Index(i)
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			if _, err := regexp.Compile(q.Value); err != nil {
				errs = append(errs, field.Invalid(qp.Child("value"), q.Value, "not a valid regular expression"))
			}
		}
	}
	if m.Method != nil && !methodRE.MatchString(string(*m.Method)) {
		errs = append(errs, field.Invalid(p.Child("method"), *m.Method, "not an HTTP method"))
	}
	return errs
}

func validatePolicyFilter(p *field.Path, f policyv1beta3.HTTPRouteFilter) field.ErrorList {
	var errs field.ErrorList
	set := map[policyv1beta3.HTTPRouteFilterType]bool{
		policyv1beta3.HTTPRouteFilterRequestHeaderModifier:  f.RequestHeaderModifier != nil,
		policyv1beta3.HTTPRouteFilterResponseHeaderModifier: f.ResponseHeaderModifier != nil,
		policyv1beta3.HTTPRouteFilterRequestRedirect:        f.RequestRedirect != nil,
	}
	present, known := set[f.Type]
	switch {
	case !known:
		errs = append(errs, field.NotSupported(p.Child("type"), f.Type, []string{"RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect"}))
	case !present:
		errs = append(errs, field.Required(p, fmt.Sprintf("filter of type %s needs its %s field", f.Type, lowerFirst(string(f.Type)))))
	}
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	if n > 1 {
		errs = append(errs, field.Forbidden(p, "exactly one filter field may be set"))
	}
	errs = append(errs, validateHeaderFilter(p.Child("requestHeaderModifier"), f.RequestHeaderModifier)...)
	errs = append(errs, validateHeaderFilter(p.Child("responseHeaderModifier"), f.ResponseHeaderModifier)...)
	errs = append(errs, validateRedirect(p.Child("requestRedirect"), f.RequestRedirect)...)
	return errs
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func validateHeaderFilter(p *field.Path, f *gatewayv1.HTTPHeaderFilter) field.ErrorList {
	if f == nil {
		return nil
	}
	var errs field.ErrorList
	for i, h := range f.Set {
		if !methodRE.MatchString(string(h.Name)) {
			errs = append(errs, field.Invalid(p.Child("set").Index(i).Child("name"), h.Name, "not a header name"))
		}
	}
	for i, h := range f.Add {
		if !methodRE.MatchString(string(h.Name)) {
			errs = append(errs, field.Invalid(p.Child("add").Index(i).Child("name"), h.Name, "not a header name"))
		}
	}
	for i, h := range f.Remove {
		if !methodRE.MatchString(h) {
			errs = append(errs, field.Invalid(p.Child("remove").Index(i), h, "not a header name"))
		}
	}
	return errs
}

func validateRedirect(p *field.Path, r *gatewayv1.HTTPRequestRedirectFilter) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.Scheme != nil && *r.Scheme != "http" && *r.Scheme != "https" {
		errs = append(errs, field.NotSupported(p.Child("scheme"), *r.Scheme, []string{"http", "https"}))
	}
	if r.StatusCode != nil && *r.StatusCode != 301 && *r.StatusCode != 302 {
		errs = append(errs, field.NotSupported(p.Child("statusCode"), *r.StatusCode, []string{"301", "302"}))
	}
	if r.Port != nil && (*r.Port < 1 || *r.Port > 65535) {
		errs = append(errs, field.Invalid(p.Child("port"), *r.Port, "must be a port number in 1-65535"))
	}
	return errs
}

func validateServiceBackend(p *field.Path, b gatewayv1.BackendObjectReference) field.ErrorList {
	group, kind := "", "Service"
	if b.Group != nil {
		group = string(*b.Group)
	}
	if b.Kind != nil {
		kind = string(*b.Kind)
	}
	if group != "" || kind != "Service" {
		return nil // not ours to judge; route status reports it
	}
	if b.Port == nil || *b.Port == 0 {
		return field.ErrorList{field.Required(p.Child("port"), "a Service backend needs a port")}
	}
	return nil
}

func validateTimeouts(p *field.Path, t *gatewayv1.HTTPRouteTimeouts) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	parse := func(name string, d *gatewayv1.Duration) (time.Duration, bool) {
		if d == nil {
			return 0, false
		}
		v, err := time.ParseDuration(string(*d))
		if err != nil || v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), string(*d), "must be a non-negative duration such as 10s"))
			return 0, false
		}
		return v, true
	}
	req, okReq := parse("request", t.Request)
	backend, okBackend := parse("backendRequest", t.BackendRequest)
	if okReq && okBackend && req != 0 && backend > req {
		errs = append(errs, field.Invalid(p.Child("backendRequest"), string(*t.BackendRequest), fmt.Sprintf("must not exceed the request timeout %s", string(*t.Request))))
	}
	return errs
}
