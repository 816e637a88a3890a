package authz

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/internal/routematch"
)

// Meta names the object a piece of policy came from: either a built-in
// default ("all-unauthenticated", "probe") or a resource.
type Meta struct {
	// Default is the name of a built-in policy; when set, the other fields
	// are empty.
	Default   string
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// DefaultMeta returns the Meta of a built-in policy.
func DefaultMeta(name string) Meta { return Meta{Default: name} }

// IsDefault reports whether m names a built-in policy.
func (m Meta) IsDefault() bool { return m.Default != "" }

// String renders m for people: "AuthorizationPolicy my-app/web-api-gateway"
// or, for a built-in, "default:all-unauthenticated".
func (m Meta) String() string {
	if m.Default != "" {
		return "default:" + m.Default
	}
	if m.Kind == "" && m.Name == "" {
		return "(none)"
	}
	if m.Namespace != "" {
		return m.Kind + " " + m.Namespace + "/" + m.Name
	}
	return m.Kind + " " + m.Name
}

// Protocol is how the proxy reads a port.
type Protocol uint8

// Protocols, as Server.spec.proxyProtocol names them.
const (
	ProtocolDetect Protocol = iota // unknown: sniff HTTP, else opaque
	ProtocolOpaque
	ProtocolTLS
	ProtocolHTTP1
	ProtocolHTTP2
	ProtocolGRPC
)

var protocolNames = [...]string{"unknown", "opaque", "TLS", "HTTP/1", "HTTP/2", "gRPC"}

// String returns the proxyProtocol spelling of p ("HTTP/1", "opaque", ...).
func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ParseProtocol reads a Server's spec.proxyProtocol. The empty string means
// "unknown" (detect), as in Linkerd.
func ParseProtocol(s string) (Protocol, error) {
	switch s {
	case "", "unknown":
		return ProtocolDetect, nil
	case "opaque":
		return ProtocolOpaque, nil
	case "TLS":
		return ProtocolTLS, nil
	case "HTTP/1":
		return ProtocolHTTP1, nil
	case "HTTP/2":
		return ProtocolHTTP2, nil
	case "gRPC":
		return ProtocolGRPC, nil
	}
	return 0, fmt.Errorf("authz: unknown proxyProtocol %q (want unknown, HTTP/1, HTTP/2, gRPC, opaque or TLS)", s)
}

// IsHTTP reports whether requests on the port may be read as HTTP.
func (p Protocol) IsHTTP() bool {
	return p == ProtocolDetect || p == ProtocolHTTP1 || p == ProtocolHTTP2 || p == ProtocolGRPC
}

// Network is a CIDR block with holes.
type Network struct {
	Net    netip.Prefix
	Except []netip.Prefix
}

// Contains reports whether ip is in the block and in none of its holes.
// IPv4-mapped IPv6 addresses are compared as IPv4.
func (n Network) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !n.Net.Contains(ip) {
		return false
	}
	for _, e := range n.Except {
		if e.Contains(ip) {
			return false
		}
	}
	return true
}

// String renders the network as "10.0.0.0/8 except 10.1.0.0/16".
func (n Network) String() string {
	if len(n.Except) == 0 {
		return n.Net.String()
	}
	ex := make([]string, len(n.Except))
	for i, e := range n.Except {
		ex[i] = e.String()
	}
	return n.Net.String() + " except " + strings.Join(ex, ",")
}

// ParseNetwork reads a CIDR ("10.0.0.0/8") or a single address
// ("10.0.0.1", meaning /32 or /128) with optional exceptions, each of which
// must lie inside the block and leave some of it. Host bits set in a CIDR
// are accepted (the network is used, as Linkerd does); use ParsePrefix to
// detect them. A zone is an error.
func ParseNetwork(cidr string, except ...string) (Network, error) {
	p, err := ParsePrefix(cidr)
	var hb *HostBitsError
	if err != nil && !errors.As(err, &hb) {
		return Network{}, err
	}
	n := Network{Net: p}
	for _, e := range except {
		ep, err := ParsePrefix(e)
		var hb *HostBitsError
		if err != nil && !errors.As(err, &hb) {
			return Network{}, fmt.Errorf("authz: except of %s: %w", cidr, err)
		}
		if ep.Addr().Is4() != p.Addr().Is4() || !p.Contains(ep.Addr()) || ep.Bits() < p.Bits() {
			return Network{}, fmt.Errorf("authz: except %s is not inside %s", e, cidr)
		}
		if ep.Bits() == p.Bits() {
			return Network{}, fmt.Errorf("authz: except %s removes all of %s", e, cidr)
		}
		n.Except = append(n.Except, ep)
	}
	return n, nil
}

// HostBitsError reports a CIDR with bits set beyond its prefix
// ("10.0.0.1/8"). Linkerd accepts such a CIDR and uses its network, so
// callers translating Linkerd objects may warn and go on with Masked.
type HostBitsError struct {
	Input  string
	Masked netip.Prefix
}

// Error describes the host bits.
func (e *HostBitsError) Error() string {
	return fmt.Sprintf("authz: network %q has host bits set (it means %s)", e.Input, e.Masked)
}

// ParsePrefix reads "10.0.0.0/8", "fd00::/8" or a bare address. It refuses
// zones ("fe80::1%eth0/64") and anything else netip refuses. For a CIDR
// with host bits set it returns the masked prefix and a *HostBitsError.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, fmt.Errorf("authz: empty network")
	}
	if strings.Contains(s, "%") {
		return netip.Prefix{}, fmt.Errorf("authz: network %q: zones are not allowed", s)
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("authz: network %q: %w", s, err)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("authz: network %q: %w", s, err)
	}
	if p.Masked() != p {
		return p.Masked(), &HostBitsError{Input: s, Masked: p.Masked()}
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("authz: network %q: use the IPv4 form of a mapped address", s)
	}
	return p, nil
}

// AllNetworks returns 0.0.0.0/0 and ::/0.
func AllNetworks() []Network {
	return []Network{
		{Net: netip.PrefixFrom(netip.IPv4Unspecified(), 0)},
		{Net: netip.PrefixFrom(netip.IPv6Unspecified(), 0)},
	}
}

// AuthnKind is what proof of identity an authorization needs.
type AuthnKind uint8

// Authentication kinds, as in Linkerd's proxy API.
const (
	// Unauthenticated permits any client, meshed or not.
	Unauthenticated AuthnKind = iota
	// TLSUnauthenticated permits any client connecting over mesh TLS,
	// whether or not it presented an identity.
	TLSUnauthenticated
	// TLSAuthenticated permits meshed clients whose identity matches.
	TLSAuthenticated
)

// Authentication says which clients an authorization admits.
type Authentication struct {
	Kind AuthnKind
	// Identities are matched exactly (TLSAuthenticated only).
	Identities []string
	// Suffixes match identities ending in "." + the suffix; the empty
	// suffix matches every identity (TLSAuthenticated only).
	Suffixes []string
}

// String renders a short description of the authentication.
func (a Authentication) String() string {
	switch a.Kind {
	case Unauthenticated:
		return "any client"
	case TLSUnauthenticated:
		return "any meshed client"
	}
	parts := make([]string, 0, len(a.Identities)+len(a.Suffixes))
	parts = append(parts, a.Identities...)
	for _, s := range a.Suffixes {
		if s == "" {
			parts = append(parts, "*")
		} else {
			parts = append(parts, "*."+s)
		}
	}
	return "identities " + strings.Join(parts, ", ")
}

// Authorization admits a class of clients.
type Authorization struct {
	// Meta is the object that granted it (AuthorizationPolicy,
	// ServerAuthorization) or the default policy's name.
	Meta Meta
	// Networks the client address must be in. Empty admits no one.
	Networks []Network
	// Authentication the client must present.
	Authentication Authentication
	// Audit marks the authorization of the "audit" default or access
	// policy: it admits traffic that nothing else admits, and the decision
	// is reported as Audit instead of Allow.
	Audit bool
	// Sources lists the authentication objects the authorization was
	// built from (MeshTLSAuthentication, NetworkAuthentication,
	// ServiceAccount), for explanations. It is not sent to proxies.
	Sources []Meta
}

// The match model is package routematch's, shared with the outbound
// router so that both directions read a route the same way; these names
// keep authz's API.

// PathKind is how a path match compares.
type PathKind = routematch.PathKind

// Path match kinds.
const (
	PathPrefix = routematch.PathPrefix
	PathExact  = routematch.PathExact
	PathRegex  = routematch.PathRegex
)

// PathMatch matches the normalized request path. Value is the exact path
// or prefix, in normalized form; for PathRegex the expression's source,
// and Regex the compiled expression, anchored at both ends.
type PathMatch = routematch.Path

// ValueMatch matches a header or query parameter value, exactly or with
// a regular expression anchored at both ends.
type ValueMatch = routematch.Value

// HTTPMatch is one match of a route rule; every present condition must
// hold. Path is nil when the match has no path condition (any path);
// Method is empty for any method.
type HTTPMatch = routematch.HTTP

// HTTPRule is a rule of a route: it applies when any of its matches
// holds; a rule without matches applies to every request.
type HTTPRule struct {
	Matches []HTTPMatch
}

// HostMatch matches the request's host: exactly, or with Suffix set,
// any host ending in "." + Value.
type HostMatch = routematch.Host

// HTTPRoute is an inbound HTTP route with its own authorizations, which
// add to the server's.
type HTTPRoute struct {
	Meta           Meta
	Hosts          []HostMatch
	Rules          []HTTPRule
	Authorizations []Authorization
	// Created orders routes with equal matches: older first. Routes from
	// the proxy API are already in order and leave it zero.
	Created time.Time
}

// GRPCMatch matches a gRPC call by service and method (empty for any)
// and headers.
type GRPCMatch = routematch.GRPC

// GRPCRule is a rule of a gRPC route; a rule without matches applies to
// every call.
type GRPCRule struct {
	Matches []GRPCMatch
}

// GRPCRoute is an inbound gRPC route.
type GRPCRoute struct {
	Meta           Meta
	Hosts          []HostMatch
	Rules          []GRPCRule
	Authorizations []Authorization
	Created        time.Time
}

// Server is the complete policy of one inbound port of one workload: what
// the proxy receives from the Inbound API, and what the evaluator reads.
type Server struct {
	// Meta is the Server resource, or the default policy when no Server
	// selects the port.
	Meta           Meta
	Protocol       Protocol
	DetectTimeout  time.Duration
	Authorizations []Authorization
	// HTTPRoutes apply when Protocol is HTTP-like but not gRPC.
	HTTPRoutes []HTTPRoute
	// GRPCRoutes apply when Protocol is ProtocolGRPC.
	GRPCRoutes []GRPCRoute
	// RateLimit limits the rate of HTTP requests; nil for none. The
	// Inbound API carries it for the detect, HTTP/1 and HTTP/2 protocols
	// only, as Linkerd's does.
	RateLimit *RateLimit
}

// DefaultHTTPRoute returns the route Linkerd gives a server without
// HTTPRoutes: every request, no authorizations of its own (the server's
// apply).
func DefaultHTTPRoute() HTTPRoute {
	return HTTPRoute{
		Meta:  DefaultMeta("default"),
		Rules: []HTTPRule{{Matches: []HTTPMatch{{Path: &PathMatch{Kind: PathPrefix, Value: "/"}}}}},
	}
}

// DefaultGRPCRoute returns the route for a gRPC server without GRPCRoutes.
func DefaultGRPCRoute() GRPCRoute {
	return GRPCRoute{Meta: DefaultMeta("default"), Rules: []GRPCRule{{}}}
}

// Validate checks what the evaluator relies on and a proxy must refuse
// otherwise: every authorization has networks and sensible
// authentication, every regex is compiled, paths are normalized, every
// route has rules. It returns the first problem found.
func (s *Server) Validate() error {
	if s.RateLimit != nil {
		if err := s.RateLimit.Validate(); err != nil {
			return fmt.Errorf("authz: server %s: %w", s.Meta, err)
		}
	}
	for i := range s.Authorizations {
		if err := s.Authorizations[i].validate(); err != nil {
			return fmt.Errorf("authz: server %s: authorization %d (%s): %w", s.Meta, i, s.Authorizations[i].Meta, err)
		}
	}
	for i := range s.HTTPRoutes {
		r := &s.HTTPRoutes[i]
		if err := r.validate(); err != nil {
			return fmt.Errorf("authz: server %s: route %s: %w", s.Meta, r.Meta, err)
		}
	}
	for i := range s.GRPCRoutes {
		r := &s.GRPCRoutes[i]
		if len(r.Rules) == 0 {
			return fmt.Errorf("authz: server %s: route %s: no rules", s.Meta, r.Meta)
		}
		for j := range r.Authorizations {
			if err := r.Authorizations[j].validate(); err != nil {
				return fmt.Errorf("authz: server %s: route %s: authorization %d: %w", s.Meta, r.Meta, j, err)
			}
		}
		for _, rule := range r.Rules {
			for _, m := range rule.Matches {
				if err := validateValues(m.Headers); err != nil {
					return fmt.Errorf("authz: server %s: route %s: %w", s.Meta, r.Meta, err)
				}
			}
		}
	}
	return nil
}

func (a *Authorization) validate() error {
	if len(a.Networks) == 0 {
		return fmt.Errorf("no networks")
	}
	for _, n := range a.Networks {
		if !n.Net.IsValid() {
			return fmt.Errorf("invalid network")
		}
	}
	switch a.Authentication.Kind {
	case Unauthenticated, TLSUnauthenticated:
	case TLSAuthenticated:
		if len(a.Authentication.Identities) == 0 && len(a.Authentication.Suffixes) == 0 {
			return fmt.Errorf("mesh TLS authentication lists no identities")
		}
	default:
		return fmt.Errorf("unknown authentication kind %d", a.Authentication.Kind)
	}
	return nil
}

func (r *HTTPRoute) validate() error {
	if len(r.Rules) == 0 {
		return fmt.Errorf("no rules")
	}
	for j := range r.Authorizations {
		if err := r.Authorizations[j].validate(); err != nil {
			return fmt.Errorf("authorization %d: %w", j, err)
		}
	}
	for _, rule := range r.Rules {
		for _, m := range rule.Matches {
			if m.Path != nil {
				switch m.Path.Kind {
				case PathExact, PathPrefix:
					if !isNormalPath(m.Path.Value) {
						return fmt.Errorf("path %q is not in normalized form", m.Path.Value)
					}
				case PathRegex:
					if m.Path.Regex == nil {
						return fmt.Errorf("path regex %q is not compiled", m.Path.Value)
					}
				default:
					return fmt.Errorf("unknown path match kind %d", m.Path.Kind)
				}
			}
			if err := validateValues(m.Headers); err != nil {
				return err
			}
			if err := validateValues(m.Query); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateValues(vs []ValueMatch) error {
	for _, v := range vs {
		if v.Name == "" {
			return fmt.Errorf("header or query match without a name")
		}
	}
	return nil
}
