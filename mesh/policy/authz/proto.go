package authz

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"net/textproto"
	"regexp"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/mesh/internal/routematch"
)

// Linkerd names the kinds of servers and authorizations in lower case on
// the wire; proxies label metrics with them.
var wireKinds = map[string]string{
	"Server":              "server",
	"ServerAuthorization": "serverauthorization",
	"AuthorizationPolicy": "authorizationpolicy",
}

var displayKinds = map[string]string{
	"server":              "Server",
	"serverauthorization": "ServerAuthorization",
	"authorizationpolicy": "AuthorizationPolicy",
	"httproute":           "HTTPRoute",
	"grpcroute":           "GRPCRoute",
}

func metaToProto(m Meta) *meta.Metadata {
	if m.Default != "" {
		return &meta.Metadata{Kind: &meta.Metadata_Default{Default: m.Default}}
	}
	kind := m.Kind
	if k, ok := wireKinds[kind]; ok {
		kind = k
	}
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
		Group: m.Group, Kind: kind, Name: m.Name, Namespace: m.Namespace,
	}}}
}

func metaLabels(m Meta) map[string]string {
	if m.Default != "" {
		return map[string]string{"group": "", "kind": "default", "name": m.Default}
	}
	kind := m.Kind
	if k, ok := wireKinds[kind]; ok {
		kind = k
	}
	return map[string]string{"group": m.Group, "kind": kind, "name": m.Name}
}

func metaFromProto(pm *meta.Metadata) (Meta, error) {
	switch k := pm.GetKind().(type) {
	case *meta.Metadata_Default:
		if k.Default == "" {
			return Meta{}, fmt.Errorf("empty default name")
		}
		return Meta{Default: k.Default}, nil
	case *meta.Metadata_Resource:
		r := k.Resource
		if r == nil || r.Kind == "" || r.Name == "" {
			return Meta{}, fmt.Errorf("resource metadata without kind or name")
		}
		kind := r.Kind
		if d, ok := displayKinds[strings.ToLower(kind)]; ok {
			kind = d
		}
		return Meta{Group: r.Group, Kind: kind, Name: r.Name, Namespace: r.Namespace}, nil
	}
	return Meta{}, fmt.Errorf("missing metadata")
}

func metaFromLabels(l map[string]string, kind string) (Meta, error) {
	if l["kind"] == "default" {
		if l["name"] == "" {
			return Meta{}, fmt.Errorf("default labels without a name")
		}
		return Meta{Default: l["name"]}, nil
	}
	if l["name"] == "" {
		return Meta{}, fmt.Errorf("missing metadata")
	}
	if k := l["kind"]; k != "" {
		kind = k
	}
	if d, ok := displayKinds[strings.ToLower(kind)]; ok {
		kind = d
	}
	group := l["group"]
	if _, ok := l["group"]; !ok {
		group = "policy.linkerd.io"
	}
	return Meta{Group: group, Kind: kind, Name: l["name"]}, nil
}

// PrefixToProto converts a prefix to the proxy API's IPNetwork.
func PrefixToProto(p netip.Prefix) *pnet.IPNetwork {
	return &pnet.IPNetwork{Ip: AddrToProto(p.Addr()), PrefixLen: uint32(p.Bits())}
}

// AddrToProto converts an address to the proxy API's IPAddress.
func AddrToProto(a netip.Addr) *pnet.IPAddress {
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: binary.BigEndian.Uint32(b[:])}}
	}
	b := a.As16()
	return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv6{Ipv6: &pnet.IPv6{
		First: binary.BigEndian.Uint64(b[:8]),
		Last:  binary.BigEndian.Uint64(b[8:]),
	}}}
}

// AddrFromProto converts the proxy API's IPAddress.
func AddrFromProto(pa *pnet.IPAddress) (netip.Addr, error) {
	switch ip := pa.GetIp().(type) {
	case *pnet.IPAddress_Ipv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], ip.Ipv4)
		return netip.AddrFrom4(b), nil
	case *pnet.IPAddress_Ipv6:
		if ip.Ipv6 == nil {
			return netip.Addr{}, fmt.Errorf("empty IPv6 address")
		}
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], ip.Ipv6.First)
		binary.BigEndian.PutUint64(b[8:], ip.Ipv6.Last)
		return netip.AddrFrom16(b), nil
	}
	return netip.Addr{}, fmt.Errorf("missing address")
}

// PrefixFromProto converts the proxy API's IPNetwork, refusing prefix
// lengths beyond the address size.
func PrefixFromProto(pn *pnet.IPNetwork) (netip.Prefix, error) {
	if pn == nil {
		return netip.Prefix{}, fmt.Errorf("missing network")
	}
	a, err := AddrFromProto(pn.Ip)
	if err != nil {
		return netip.Prefix{}, err
	}
	if int(pn.PrefixLen) > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("prefix length %d too long for %s", pn.PrefixLen, a)
	}
	return netip.PrefixFrom(a, int(pn.PrefixLen)).Masked(), nil
}

func authzToProto(a *Authorization) *inbound.Authz {
	m := a.Meta
	if a.Audit && m.Default == "" {
		m = DefaultMeta("audit")
	}
	pa := &inbound.Authz{
		Metadata: metaToProto(m),
		Labels:   metaLabels(m),
	}
	for _, n := range a.Networks {
		pn := &inbound.Network{Net: PrefixToProto(n.Net)}
		for _, e := range n.Except {
			pn.Except = append(pn.Except, PrefixToProto(e))
		}
		pa.Networks = append(pa.Networks, pn)
	}
	switch a.Authentication.Kind {
	case Unauthenticated:
		pa.Authentication = &inbound.Authn{Permit: &inbound.Authn_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}}}
	case TLSUnauthenticated:
		pa.Authentication = &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
			Clients: &inbound.Authn_PermitMeshTLS_Unauthenticated{Unauthenticated: &inbound.Authn_PermitUnauthenticated{}},
		}}}
	case TLSAuthenticated:
		ids := &inbound.Authn_PermitMeshTLS_PermitClientIdentities{}
		for _, id := range a.Authentication.Identities {
			ids.Identities = append(ids.Identities, &inbound.Identity{Name: id})
		}
		for _, s := range a.Authentication.Suffixes {
			parts := []string{}
			if s != "" {
				parts = strings.Split(s, ".")
			}
			ids.Suffixes = append(ids.Suffixes, &inbound.IdentitySuffix{Parts: parts})
		}
		pa.Authentication = &inbound.Authn{Permit: &inbound.Authn_MeshTLS{MeshTLS: &inbound.Authn_PermitMeshTLS{
			Clients: &inbound.Authn_PermitMeshTLS_Identities{Identities: ids},
		}}}
	}
	return pa
}

func authzsToProto(as []Authorization) []*inbound.Authz {
	out := make([]*inbound.Authz, 0, len(as))
	for i := range as {
		out = append(out, authzToProto(&as[i]))
	}
	return out
}

// MethodToProto converts an HTTP method name.
func MethodToProto(m string) *httptypes.HttpMethod {
	if v, ok := httptypes.HttpMethod_Registered_value[m]; ok {
		return &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_Registered(v)}}
	}
	return &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Unregistered{Unregistered: m}}
}

func methodFromProto(pm *httptypes.HttpMethod) (string, error) {
	switch t := pm.GetType().(type) {
	case *httptypes.HttpMethod_Registered_:
		name, ok := httptypes.HttpMethod_Registered_name[int32(t.Registered)]
		if !ok {
			return "", fmt.Errorf("unknown registered method %d", t.Registered)
		}
		return name, nil
	case *httptypes.HttpMethod_Unregistered:
		if t.Unregistered == "" {
			return "", fmt.Errorf("empty method")
		}
		return t.Unregistered, nil
	}
	return "", fmt.Errorf("method match without a method")
}

// HostsToProto converts host matches.
func HostsToProto(hs []HostMatch) []*httproute.HostMatch {
	var out []*httproute.HostMatch
	for _, h := range hs {
		if h.Suffix {
			labels := strings.Split(h.Value, ".")
			rev := make([]string, 0, len(labels))
			for i := len(labels) - 1; i >= 0; i-- {
				rev = append(rev, labels[i])
			}
			out = append(out, &httproute.HostMatch{Match: &httproute.HostMatch_Suffix_{Suffix: &httproute.HostMatch_Suffix{ReverseLabels: rev}}})
		} else {
			out = append(out, &httproute.HostMatch{Match: &httproute.HostMatch_Exact{Exact: h.Value}})
		}
	}
	return out
}

func hostsFromProto(phs []*httproute.HostMatch) ([]HostMatch, error) {
	var out []HostMatch
	for _, ph := range phs {
		switch m := ph.GetMatch().(type) {
		case *httproute.HostMatch_Exact:
			out = append(out, HostMatch{Value: m.Exact})
		case *httproute.HostMatch_Suffix_:
			labels := m.Suffix.GetReverseLabels()
			if len(labels) == 0 {
				return nil, fmt.Errorf("host suffix without labels")
			}
			fwd := make([]string, 0, len(labels))
			for i := len(labels) - 1; i >= 0; i-- {
				fwd = append(fwd, labels[i])
			}
			out = append(out, HostMatch{Value: strings.Join(fwd, "."), Suffix: true})
		default:
			return nil, fmt.Errorf("host match without a value")
		}
	}
	return out, nil
}

// ValuesToProtoHeaders converts header matches.
func ValuesToProtoHeaders(vs []ValueMatch) []*httproute.HeaderMatch {
	var out []*httproute.HeaderMatch
	for _, v := range vs {
		hm := &httproute.HeaderMatch{Name: strings.ToLower(v.Name)}
		if v.Regex != nil {
			hm.Value = &httproute.HeaderMatch_Regex{Regex: unanchor(v.Regex.String())}
		} else {
			hm.Value = &httproute.HeaderMatch_Exact{Exact: []byte(v.Exact)}
		}
		out = append(out, hm)
	}
	return out
}

func headersFromProto(phs []*httproute.HeaderMatch) ([]ValueMatch, error) {
	var out []ValueMatch
	for _, ph := range phs {
		if ph.Name == "" {
			return nil, fmt.Errorf("header match without a name")
		}
		vm := ValueMatch{Name: textproto.CanonicalMIMEHeaderKey(ph.Name)}
		switch v := ph.Value.(type) {
		case *httproute.HeaderMatch_Exact:
			vm.Exact = string(v.Exact)
		case *httproute.HeaderMatch_Regex:
			re, err := CompileAnchored(v.Regex)
			if err != nil {
				return nil, fmt.Errorf("header %s: %w", ph.Name, err)
			}
			vm.Regex = re
		default:
			return nil, fmt.Errorf("header match %s without a value", ph.Name)
		}
		out = append(out, vm)
	}
	return out, nil
}

// CompileAnchored compiles a route regular expression so that it must
// match the whole value, as Gateway API implementations and Linkerd do.
func CompileAnchored(expr string) (*regexp.Regexp, error) {
	re, err := routematch.Anchored(expr)
	if err != nil {
		return nil, fmt.Errorf("authz: invalid regular expression %q: %w", expr, err)
	}
	return re, nil
}

func unanchor(s string) string {
	if strings.HasPrefix(s, "^(?:") && strings.HasSuffix(s, ")$") {
		return s[4 : len(s)-2]
	}
	return s
}

// HTTPMatchToProto converts a route match to the proxy API's form.
func HTTPMatchToProto(m HTTPMatch) *httproute.HttpRouteMatch {
	pm := &httproute.HttpRouteMatch{Headers: ValuesToProtoHeaders(m.Headers)}
	if m.Path != nil {
		switch m.Path.Kind {
		case PathExact:
			pm.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: m.Path.Value}}
		case PathPrefix:
			pm.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: m.Path.Value}}
		case PathRegex:
			pm.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: m.Path.Value}}
		}
	}
	for _, q := range m.Query {
		qm := &httproute.QueryParamMatch{Name: q.Name}
		if q.Regex != nil {
			qm.Value = &httproute.QueryParamMatch_Regex{Regex: unanchor(q.Regex.String())}
		} else {
			qm.Value = &httproute.QueryParamMatch_Exact{Exact: q.Exact}
		}
		pm.QueryParams = append(pm.QueryParams, qm)
	}
	if m.Method != "" {
		pm.Method = MethodToProto(m.Method)
	}
	return pm
}

// GRPCMatchToProto converts a gRPC route match to the proxy API's form.
func GRPCMatchToProto(m GRPCMatch) *grpcroute.GrpcRouteMatch {
	pm := &grpcroute.GrpcRouteMatch{Headers: ValuesToProtoHeaders(m.Headers)}
	if m.Service != "" || m.Method != "" {
		pm.Rpc = &grpcroute.GrpcRpcMatch{Service: m.Service, Method: m.Method}
	}
	return pm
}

func httpRouteToProto(r *HTTPRoute) *inbound.HttpRoute {
	pr := &inbound.HttpRoute{
		Metadata:       metaToProto(r.Meta),
		Hosts:          HostsToProto(r.Hosts),
		Authorizations: authzsToProto(r.Authorizations),
	}
	for _, rule := range r.Rules {
		prr := &inbound.HttpRoute_Rule{}
		for _, m := range rule.Matches {
			pm := HTTPMatchToProto(m)
			prr.Matches = append(prr.Matches, pm)
		}
		pr.Rules = append(pr.Rules, prr)
	}
	return pr
}

func grpcRouteToProto(r *GRPCRoute) *inbound.GrpcRoute {
	pr := &inbound.GrpcRoute{
		Metadata:       metaToProto(r.Meta),
		Hosts:          HostsToProto(r.Hosts),
		Authorizations: authzsToProto(r.Authorizations),
	}
	for _, rule := range r.Rules {
		prr := &inbound.GrpcRoute_Rule{}
		for _, m := range rule.Matches {
			prr.Matches = append(prr.Matches, GRPCMatchToProto(m))
		}
		pr.Rules = append(pr.Rules, prr)
	}
	return pr
}

// ToProto converts s into the message the Inbound API sends to proxies,
// in the layout Linkerd's policy controller uses (metadata and legacy
// labels on the server and every authorization). The rate limit goes with
// the detect, HTTP/1 and HTTP/2 protocols; the gRPC, opaque and TLS ones
// have no place for it.
func ToProto(s *Server) *inbound.Server {
	ps := &inbound.Server{
		Authorizations: authzsToProto(s.Authorizations),
		Labels:         metaLabels(s.Meta),
	}
	var hr []*inbound.HttpRoute
	for i := range s.HTTPRoutes {
		hr = append(hr, httpRouteToProto(&s.HTTPRoutes[i]))
	}
	rl := rateLimitToProto(s.RateLimit)
	switch s.Protocol {
	case ProtocolDetect:
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Detect_{Detect: &inbound.ProxyProtocol_Detect{
			Timeout: durationpb.New(s.DetectTimeout), HttpRoutes: hr, HttpLocalRateLimit: rl,
		}}}
	case ProtocolHTTP1:
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http1_{Http1: &inbound.ProxyProtocol_Http1{Routes: hr, LocalRateLimit: rl}}}
	case ProtocolHTTP2:
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Http2_{Http2: &inbound.ProxyProtocol_Http2{Routes: hr, LocalRateLimit: rl}}}
	case ProtocolGRPC:
		var gr []*inbound.GrpcRoute
		for i := range s.GRPCRoutes {
			gr = append(gr, grpcRouteToProto(&s.GRPCRoutes[i]))
		}
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Grpc_{Grpc: &inbound.ProxyProtocol_Grpc{Routes: gr}}}
	case ProtocolOpaque:
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Opaque_{Opaque: &inbound.ProxyProtocol_Opaque{}}}
	case ProtocolTLS:
		ps.Protocol = &inbound.ProxyProtocol{Kind: &inbound.ProxyProtocol_Tls_{Tls: &inbound.ProxyProtocol_Tls{}}}
	}
	return ps
}
