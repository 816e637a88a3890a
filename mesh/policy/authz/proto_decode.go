package authz

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
)

// FromProto converts a policy received from the Inbound API into a
// Server the evaluator reads. It is strict, so that a proxy never reads a
// policy it does not fully understand as more permissive than intended:
// unknown protocol kinds, authorizations without networks or
// authentication, matches without values, invalid regular expressions,
// and unknown fields inside authorizations and route matches (a newer
// control plane's matchers) are errors; the caller should keep its last
// good policy or deny. The rate limit is read by RateLimitFromProto, as
// strictly. Route filters are not read.
func FromProto(ps *inbound.Server) (*Server, error) {
	if ps == nil {
		return nil, fmt.Errorf("authz: nil server")
	}
	s := &Server{}
	var err error
	if s.Meta, err = metaFromLabels(ps.Labels, "server"); err != nil {
		// Linkerd's servers always send labels; be lenient only about
		// their absence.
		s.Meta = Meta{Default: "unnamed"}
	}
	if s.Authorizations, err = authzsFromProto(ps.Authorizations); err != nil {
		return nil, fmt.Errorf("authz: server %s: %w", s.Meta, err)
	}
	p := ps.GetProtocol()
	if p == nil {
		return nil, fmt.Errorf("authz: server %s: missing protocol", s.Meta)
	}
	var hr []*inbound.HttpRoute
	var rl *inbound.HttpLocalRateLimit
	switch k := p.Kind.(type) {
	case *inbound.ProxyProtocol_Detect_:
		s.Protocol = ProtocolDetect
		s.DetectTimeout = k.Detect.GetTimeout().AsDuration()
		hr = k.Detect.GetHttpRoutes()
		rl = k.Detect.GetHttpLocalRateLimit()
	case *inbound.ProxyProtocol_Http1_:
		s.Protocol = ProtocolHTTP1
		hr = k.Http1.GetRoutes()
		rl = k.Http1.GetLocalRateLimit()
	case *inbound.ProxyProtocol_Http2_:
		s.Protocol = ProtocolHTTP2
		hr = k.Http2.GetRoutes()
		rl = k.Http2.GetLocalRateLimit()
	case *inbound.ProxyProtocol_Grpc_:
		s.Protocol = ProtocolGRPC
		for _, pr := range k.Grpc.GetRoutes() {
			r, err := grpcRouteFromProto(pr)
			if err != nil {
				return nil, fmt.Errorf("authz: server %s: %w", s.Meta, err)
			}
			s.GRPCRoutes = append(s.GRPCRoutes, r)
		}
	case *inbound.ProxyProtocol_Opaque_:
		s.Protocol = ProtocolOpaque
	case *inbound.ProxyProtocol_Tls_:
		s.Protocol = ProtocolTLS
	default:
		return nil, fmt.Errorf("authz: server %s: unknown protocol", s.Meta)
	}
	for _, pr := range hr {
		r, err := httpRouteFromProto(pr)
		if err != nil {
			return nil, fmt.Errorf("authz: server %s: %w", s.Meta, err)
		}
		s.HTTPRoutes = append(s.HTTPRoutes, r)
	}
	if s.RateLimit, err = rateLimitFromProto(rl); err != nil {
		return nil, fmt.Errorf("authz: server %s: %w", s.Meta, err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func authzsFromProto(pas []*inbound.Authz) ([]Authorization, error) {
	var out []Authorization
	for i, pa := range pas {
		a, err := authzFromProto(pa)
		if err != nil {
			return nil, fmt.Errorf("authorization %d: %w", i, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func authzFromProto(pa *inbound.Authz) (Authorization, error) {
	var a Authorization
	if err := unknownFields(pa); err != nil {
		return a, err
	}
	var err error
	if pa.Metadata != nil {
		a.Meta, err = metaFromProto(pa.Metadata)
	} else {
		a.Meta, err = metaFromLabels(pa.Labels, "serverauthorization")
	}
	if err != nil {
		return a, err
	}
	a.Audit = a.Meta.Default == "audit"
	if len(pa.Networks) == 0 {
		return a, fmt.Errorf("%s: no networks", a.Meta)
	}
	for _, pn := range pa.Networks {
		p, err := PrefixFromProto(pn.GetNet())
		if err != nil {
			return a, fmt.Errorf("%s: %w", a.Meta, err)
		}
		n := Network{Net: p}
		for _, pe := range pn.Except {
			e, err := PrefixFromProto(pe)
			if err != nil {
				return a, fmt.Errorf("%s: except: %w", a.Meta, err)
			}
			n.Except = append(n.Except, e)
		}
		a.Networks = append(a.Networks, n)
	}
	switch p := pa.GetAuthentication().GetPermit().(type) {
	case *inbound.Authn_Unauthenticated:
		a.Authentication.Kind = Unauthenticated
	case *inbound.Authn_MeshTLS:
		switch c := p.MeshTLS.GetClients().(type) {
		case *inbound.Authn_PermitMeshTLS_Unauthenticated:
			a.Authentication.Kind = TLSUnauthenticated
		case *inbound.Authn_PermitMeshTLS_Identities:
			a.Authentication.Kind = TLSAuthenticated
			for _, id := range c.Identities.GetIdentities() {
				if id.GetName() == "" {
					return a, fmt.Errorf("%s: empty identity", a.Meta)
				}
				a.Authentication.Identities = append(a.Authentication.Identities, id.GetName())
			}
			for _, sfx := range c.Identities.GetSuffixes() {
				a.Authentication.Suffixes = append(a.Authentication.Suffixes, strings.Join(sfx.GetParts(), "."))
			}
			if len(a.Authentication.Identities) == 0 && len(a.Authentication.Suffixes) == 0 {
				return a, fmt.Errorf("%s: mesh TLS authentication lists no identities", a.Meta)
			}
			sort.Strings(a.Authentication.Identities)
		default:
			return a, fmt.Errorf("%s: mesh TLS authentication without clients", a.Meta)
		}
	default:
		return a, fmt.Errorf("%s: missing authentication", a.Meta)
	}
	return a, nil
}

// routeHeadFromProto decodes what HTTP and gRPC routes share: their
// metadata, hostnames and authorizations.
func routeHeadFromProto(pm *meta.Metadata, phs []*httproute.HostMatch, pas []*inbound.Authz) (Meta, []HostMatch, []Authorization, error) {
	md, err := metaFromProto(pm)
	if err != nil {
		return md, nil, nil, fmt.Errorf("route: %w", err)
	}
	for _, h := range phs {
		if err := unknownFields(h); err != nil {
			return md, nil, nil, fmt.Errorf("route %s: %w", md, err)
		}
	}
	hosts, err := hostsFromProto(phs)
	if err != nil {
		return md, nil, nil, fmt.Errorf("route %s: %w", md, err)
	}
	authzs, err := authzsFromProto(pas)
	if err != nil {
		return md, nil, nil, fmt.Errorf("route %s: %w", md, err)
	}
	return md, hosts, authzs, nil
}

func httpRouteFromProto(pr *inbound.HttpRoute) (HTTPRoute, error) {
	var r HTTPRoute
	var err error
	if r.Meta, r.Hosts, r.Authorizations, err = routeHeadFromProto(pr.GetMetadata(), pr.Hosts, pr.Authorizations); err != nil {
		return r, err
	}
	for _, prr := range pr.Rules {
		var rule HTTPRule
		for _, pm := range prr.Matches {
			if err := unknownFields(pm); err != nil {
				return r, fmt.Errorf("route %s: %w", r.Meta, err)
			}
			var m HTTPMatch
			if pm.Path != nil {
				switch k := pm.Path.Kind.(type) {
				case *httproute.PathMatch_Exact:
					m.Path = &PathMatch{Kind: PathExact, Value: k.Exact}
				case *httproute.PathMatch_Prefix:
					m.Path = &PathMatch{Kind: PathPrefix, Value: k.Prefix}
				case *httproute.PathMatch_Regex:
					re, err := CompileAnchored(k.Regex)
					if err != nil {
						return r, fmt.Errorf("route %s: %w", r.Meta, err)
					}
					m.Path = &PathMatch{Kind: PathRegex, Value: k.Regex, Regex: re}
				default:
					return r, fmt.Errorf("route %s: path match without a value", r.Meta)
				}
				if m.Path.Kind != PathRegex && !isNormalPath(m.Path.Value) {
					return r, fmt.Errorf("route %s: path %q is not in normalized form", r.Meta, m.Path.Value)
				}
			}
			if m.Headers, err = headersFromProto(pm.Headers); err != nil {
				return r, fmt.Errorf("route %s: %w", r.Meta, err)
			}
			for _, q := range pm.QueryParams {
				if q.Name == "" {
					return r, fmt.Errorf("route %s: query match without a name", r.Meta)
				}
				vm := ValueMatch{Name: q.Name}
				switch v := q.Value.(type) {
				case *httproute.QueryParamMatch_Exact:
					vm.Exact = v.Exact
				case *httproute.QueryParamMatch_Regex:
					re, err := CompileAnchored(v.Regex)
					if err != nil {
						return r, fmt.Errorf("route %s: %w", r.Meta, err)
					}
					vm.Regex = re
				default:
					return r, fmt.Errorf("route %s: query match %s without a value", r.Meta, q.Name)
				}
				m.Query = append(m.Query, vm)
			}
			if pm.Method != nil {
				if m.Method, err = methodFromProto(pm.Method); err != nil {
					return r, fmt.Errorf("route %s: %w", r.Meta, err)
				}
			}
			rule.Matches = append(rule.Matches, m)
		}
		r.Rules = append(r.Rules, rule)
	}
	return r, nil
}

func grpcRouteFromProto(pr *inbound.GrpcRoute) (GRPCRoute, error) {
	var r GRPCRoute
	var err error
	if r.Meta, r.Hosts, r.Authorizations, err = routeHeadFromProto(pr.GetMetadata(), pr.Hosts, pr.Authorizations); err != nil {
		return r, err
	}
	for _, prr := range pr.Rules {
		var rule GRPCRule
		for _, pm := range prr.Matches {
			if err := unknownFields(pm); err != nil {
				return r, fmt.Errorf("route %s: %w", r.Meta, err)
			}
			m := GRPCMatch{Service: pm.GetRpc().GetService(), Method: pm.GetRpc().GetMethod()}
			if m.Headers, err = headersFromProto(pm.Headers); err != nil {
				return r, fmt.Errorf("route %s: %w", r.Meta, err)
			}
			rule.Matches = append(rule.Matches, m)
		}
		r.Rules = append(r.Rules, rule)
	}
	return r, nil
}

// unknownFields returns an error if m or any message inside it carries
// fields this build does not know: a newer control plane's matcher must
// not be read as "match everything".
func unknownFields(m proto.Message) error {
	var walk func(protoreflect.Message) error
	walk = func(rm protoreflect.Message) error {
		if len(rm.GetUnknown()) > 0 {
			return fmt.Errorf("%s carries fields this proxy does not understand", rm.Descriptor().FullName())
		}
		var err error
		rm.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				l := v.List()
				for i := 0; i < l.Len() && err == nil; i++ {
					err = walk(l.Get(i).Message())
				}
			case fd.IsMap():
				if fd.MapValue().Message() != nil {
					v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
						err = walk(mv.Message())
						return err == nil
					})
				}
			case fd.Message() != nil:
				err = walk(v.Message())
			}
			return err == nil
		})
		return err
	}
	return walk(m.ProtoReflect())
}
