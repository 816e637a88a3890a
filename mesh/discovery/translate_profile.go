package discovery

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/ports"
	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation"
)

// profile resolves a target to its profile. The error, when not nil,
// explains why a ServiceProfile was ignored; the profile is then the
// default one and still valid.
func (c *cluster) profile(t Target, tok ContextToken, cfg *config) (Profile, dependency, error) {
	if t.IsIP() {
		dep := dependency{ip: t.IP}
		if id, ok := c.serviceForIP(t.IP); ok {
			p, d, err := c.serviceProfile(id, t.Port, tok, cfg)
			d.ip = t.IP
			return p, d, err
		}
		addr := netip.AddrPortFrom(t.IP, uint16(t.Port))
		if pod := c.podForIP(t.IP, t.Port); pod != nil {
			dep.namespace = pod.Namespace
			ep := c.podEndpoint(pod, addr, "", cfg)
			return Profile{
				Endpoint:       &ep,
				OpaqueProtocol: c.podInfo(pod, cfg).opaque.Contains(t.Port),
				RetryBudget:    DefaultRetryBudget(),
				Port:           t.Port,
			}, dep, nil
		}
		ep := Endpoint{Addr: addr, Weight: defaultEndpointWeight}
		return Profile{
			Endpoint:       &ep,
			OpaqueProtocol: cfg.defaultOpaque.Contains(t.Port),
			RetryBudget:    DefaultRetryBudget(),
			Port:           t.Port,
		}, dep, nil
	}
	if t.Hostname != "" {
		set := c.serviceEndpoints(t.Service, t.Port, t.Hostname, cfg)
		if len(set.Endpoints) > 0 {
			ep := set.Endpoints[0]
			opaque := ep.Hint == HintOpaque
			if ep.Hint == HintUnknown {
				opaque = cfg.defaultOpaque.Contains(t.Port)
			}
			return Profile{
				Endpoint:       &ep,
				OpaqueProtocol: opaque,
				RetryBudget:    DefaultRetryBudget(),
				Port:           t.Port,
			}, dependency{service: t.Service, namespace: t.Service.Namespace}, nil
		}
	}
	return c.serviceProfile(t.Service, t.Port, tok, cfg)
}

func (c *cluster) serviceProfile(id ServiceID, port uint32, tok ContextToken, cfg *config) (Profile, dependency, error) {
	fqn := serviceFQDN(id, cfg.clusterDomain)
	dep := dependency{service: id, namespace: id.Namespace}
	p := Profile{FullyQualifiedName: fqn, RetryBudget: DefaultRetryBudget(), Port: port}
	svc := c.services[objKey{id.Namespace, id.Name}]
	if svc != nil {
		sid := id
		p.Service = &sid
	}
	var sp *spv1alpha2.ServiceProfile
	if tok.Namespace != "" {
		dep.profileKey[0] = objKey{tok.Namespace, fqn}
		sp = c.profiles[dep.profileKey[0]]
	}
	dep.profileKey[1] = objKey{id.Namespace, fqn}
	if sp == nil {
		sp = c.profiles[dep.profileKey[1]]
	}
	var svcAnn, nsAnn map[string]string
	if svc != nil {
		svcAnn = svc.Annotations
	}
	if ns := c.namespaces[id.Namespace]; ns != nil {
		nsAnn = ns.Annotations
	}
	opaque, _, err := ports.OpaqueForService(svcAnn, nsAnn, cfg.defaultOpaque)
	if err != nil {
		cfg.logger.Warn("discovery: bad opaque-ports annotation; no port is opaque", "service", id.Namespace+"/"+id.Name, "error", err)
	}
	p.OpaqueProtocol = opaque.Contains(port)
	if sp == nil {
		return p, dep, nil
	}
	fromSP, err := TranslateServiceProfile(sp)
	if err != nil {
		return p, dep, err
	}
	fromSP.FullyQualifiedName, fromSP.Service, fromSP.Port = p.FullyQualifiedName, p.Service, port
	fromSP.OpaqueProtocol = p.OpaqueProtocol
	if ps, err := ParsePortSet(strings.Join(sp.Spec.OpaquePorts, ","), nil); err == nil && ps.Contains(port) {
		fromSP.OpaqueProtocol = true
	}
	return fromSP, dep, nil
}

// maxMatchDepth bounds the nesting of all/any/not in a ServiceProfile.
const maxMatchDepth = 16

// ProfileError is one invalid field of a ServiceProfile.
type ProfileError struct {
	// Profile is the profile's namespace/name.
	Profile string
	// Field is the path of the field ("spec.routes[0].condition.pathRegex").
	Field string
	// Message says what is wrong with it.
	Message string
}

func (e *ProfileError) Error() string {
	return fmt.Sprintf("discovery: ServiceProfile %s: %s: %s", e.Profile, e.Field, e.Message)
}

// TranslateServiceProfile converts a ServiceProfile into a profile's
// routes, retry budget and traffic split, checking it as it goes: the name
// must be a DNS name (the service's FQDN), every route needs a name and a
// condition setting at least one field, methods must be HTTP tokens,
// regular expressions must compile, durations must parse and not be
// negative, status ranges must lie within 100-599, the retry ratio must be
// a non-negative number, overrides need a host[:port] authority and a
// weight that is not negative, opaque ports must parse. An invalid profile
// yields every problem found, joined (errors.Join), each a *ProfileError
// naming the field. The destination controller ignores such a profile and
// the validating webhook (mesh/inject/webhook) refuses it, with these
// same messages. FullyQualifiedName, Service, Port and OpaqueProtocol are
// left for the caller.
func TranslateServiceProfile(sp *spv1alpha2.ServiceProfile) (Profile, error) {
	p := Profile{RetryBudget: DefaultRetryBudget(), Source: sp.Namespace + "/" + sp.Name}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ProfileError{Profile: p.Source, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if msgs := validation.IsDNS1123Subdomain(sp.Name); len(msgs) > 0 {
		bad("metadata.name", "%q is not the service's fully qualified DNS name (such as web.shop.svc.cluster.local): %s", sp.Name, strings.Join(msgs, "; "))
	}
	for i, r := range sp.Spec.Routes {
		at := fmt.Sprintf("spec.routes[%d]", i)
		if strings.TrimSpace(r.Name) == "" {
			bad(at+".name", "every route needs a name")
		}
		route := Route{Name: r.Name, IsRetryable: r.IsRetryable}
		if r.Condition == nil {
			bad(at+".condition", "every route needs a condition")
		} else {
			cond, where, err := requestMatch(*r.Condition, 0)
			if err != nil {
				bad(at+".condition"+where, "%v", err)
			}
			route.Condition = cond
		}
		if r.Timeout != "" {
			d, err := time.ParseDuration(r.Timeout)
			if err != nil || d < 0 {
				bad(at+".timeout", "%q is not a duration such as 300ms or 10s", r.Timeout)
			}
			route.Timeout = d
		}
		for j, rc := range r.ResponseClasses {
			cp := fmt.Sprintf("%s.responseClasses[%d].condition", at, j)
			if rc.Condition == nil {
				bad(cp, "every response class needs a condition")
				continue
			}
			m, where, err := responseMatch(*rc.Condition, 0)
			if err != nil {
				bad(cp+where, "%v", err)
				continue
			}
			route.ResponseClasses = append(route.ResponseClasses, ResponseClass{Condition: m, IsFailure: rc.IsFailure})
		}
		p.Routes = append(p.Routes, route)
	}
	if b := sp.Spec.RetryBudget; b != nil {
		ratio := float64(b.RetryRatio)
		if ratio < 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
			bad("spec.retryBudget.retryRatio", "%v is not a non-negative number", b.RetryRatio)
		}
		ttl, err := time.ParseDuration(b.TTL)
		if err != nil || ttl <= 0 {
			bad("spec.retryBudget.ttl", "%q is not a positive duration such as 10s", b.TTL)
		}
		p.RetryBudget = RetryBudget{RetryRatio: b.RetryRatio, MinRetriesPerSecond: b.MinRetriesPerSecond, TTL: ttl}
	}
	for i, d := range sp.Spec.DstOverrides {
		at := fmt.Sprintf("spec.dstOverrides[%d]", i)
		if err := checkAuthority(d.Authority); err != nil {
			bad(at+".authority", "%v", err)
		}
		w := d.Weight.MilliValue() * 10 // ten-thousandths, as Linkerd sends them
		if w < 0 || w > 1<<32-1 {
			bad(at+".weight", "%s is out of range", d.Weight.String())
		}
		p.DstOverrides = append(p.DstOverrides, WeightedDst{Authority: d.Authority, Weight: uint32(w)})
	}
	for i, ports := range sp.Spec.OpaquePorts {
		if _, err := ParsePortSet(ports, nil); err != nil {
			bad(fmt.Sprintf("spec.opaquePorts[%d]", i), "%v", err)
		}
	}
	if len(errs) > 0 {
		return Profile{}, errors.Join(errs...)
	}
	return p, nil
}

// checkAuthority accepts host or host:port with a DNS host name or an IP.
func checkAuthority(a string) error {
	if a == "" {
		return errors.New("must not be empty")
	}
	if ap, err := netip.ParseAddrPort(a); err == nil && ap.Port() != 0 {
		return nil
	}
	host := a
	if h, port, ok := strings.Cut(a, ":"); ok {
		n, err := strconv.Atoi(port)
		if err != nil || strconv.Itoa(n) != port || n < 1 || n > 65535 {
			return fmt.Errorf("port %q is not a number in 1-65535", port)
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

var errTooDeep = fmt.Errorf("nested deeper than %d levels", maxMatchDepth)

// requestMatch converts a condition; several fields set at once mean all
// of them. On error it also returns the path below the condition
// (".all[0].pathRegex") of the field at fault.
func requestMatch(m spv1alpha2.RequestMatch, depth int) (RequestMatch, string, error) {
	if depth > maxMatchDepth {
		return RequestMatch{}, "", errTooDeep
	}
	var parts []RequestMatch
	if m.All != nil {
		all := []RequestMatch{}
		for i, x := range m.All {
			c, where, err := requestMatch(x, depth+1)
			if err != nil {
				return RequestMatch{}, fmt.Sprintf(".all[%d]%s", i, where), err
			}
			all = append(all, c)
		}
		parts = append(parts, RequestMatch{All: all})
	}
	if m.Any != nil {
		anyOf := []RequestMatch{}
		for i, x := range m.Any {
			c, where, err := requestMatch(x, depth+1)
			if err != nil {
				return RequestMatch{}, fmt.Sprintf(".any[%d]%s", i, where), err
			}
			anyOf = append(anyOf, c)
		}
		parts = append(parts, RequestMatch{Any: anyOf})
	}
	if m.Method != "" {
		// A method is an RFC 9110 token, which is what a header field
		// name is too: httpguts has the one token check Weft uses.
		if !httpguts.ValidHeaderFieldName(m.Method) {
			return RequestMatch{}, ".method", fmt.Errorf("%q is not an HTTP method", m.Method)
		}
		parts = append(parts, RequestMatch{Method: strings.ToUpper(m.Method)})
	}
	if m.Not != nil {
		c, where, err := requestMatch(*m.Not, depth+1)
		if err != nil {
			return RequestMatch{}, ".not" + where, err
		}
		parts = append(parts, RequestMatch{Not: &c})
	}
	if m.PathRegex != "" {
		if _, err := regexp.Compile(m.PathRegex); err != nil {
			return RequestMatch{}, ".pathRegex", fmt.Errorf("%q is not a valid regular expression: %w", m.PathRegex, err)
		}
		parts = append(parts, RequestMatch{PathRegex: m.PathRegex})
	}
	switch len(parts) {
	case 0:
		return RequestMatch{}, "", errors.New("sets no field (want all, any, not, method or pathRegex)")
	case 1:
		return parts[0], "", nil
	default:
		return RequestMatch{All: parts}, "", nil
	}
}

func responseMatch(m spv1alpha2.ResponseMatch, depth int) (ResponseMatch, string, error) {
	if depth > maxMatchDepth {
		return ResponseMatch{}, "", errTooDeep
	}
	var parts []ResponseMatch
	if m.All != nil {
		all := []ResponseMatch{}
		for i, x := range m.All {
			c, where, err := responseMatch(x, depth+1)
			if err != nil {
				return ResponseMatch{}, fmt.Sprintf(".all[%d]%s", i, where), err
			}
			all = append(all, c)
		}
		parts = append(parts, ResponseMatch{All: all})
	}
	if m.Any != nil {
		anyOf := []ResponseMatch{}
		for i, x := range m.Any {
			c, where, err := responseMatch(x, depth+1)
			if err != nil {
				return ResponseMatch{}, fmt.Sprintf(".any[%d]%s", i, where), err
			}
			anyOf = append(anyOf, c)
		}
		parts = append(parts, ResponseMatch{Any: anyOf})
	}
	if m.Status != nil {
		s := *m.Status
		if (s.Min != 0 && (s.Min < 100 || s.Min > 599)) || (s.Max != 0 && (s.Max < 100 || s.Max > 599)) || (s.Min != 0 && s.Max != 0 && s.Min > s.Max) {
			return ResponseMatch{}, ".status", fmt.Errorf("{min: %d, max: %d}: want 100 <= min <= max <= 599", s.Min, s.Max)
		}
		parts = append(parts, ResponseMatch{Status: &StatusRange{Min: s.Min, Max: s.Max}})
	}
	if m.Not != nil {
		c, where, err := responseMatch(*m.Not, depth+1)
		if err != nil {
			return ResponseMatch{}, ".not" + where, err
		}
		parts = append(parts, ResponseMatch{Not: &c})
	}
	switch len(parts) {
	case 0:
		return ResponseMatch{}, "", errors.New("sets no field (want all, any, not or status)")
	case 1:
		return parts[0], "", nil
	default:
		return ResponseMatch{All: parts}, "", nil
	}
}
