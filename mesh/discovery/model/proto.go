package model

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pbnet "github.com/weftmesh/weft/apis/proxy/net"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TCPAddressToProto converts an address to the proxy API's TcpAddress.
func TCPAddressToProto(a netip.AddrPort) *pbnet.TcpAddress {
	return &pbnet.TcpAddress{Ip: ipToProto(a.Addr()), Port: uint32(a.Port())}
}

func ipToProto(ip netip.Addr) *pbnet.IPAddress {
	ip = ip.Unmap()
	if ip.Is4() {
		b := ip.As4()
		return &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv4{Ipv4: binary.BigEndian.Uint32(b[:])}}
	}
	b := ip.As16()
	return &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv6{Ipv6: &pbnet.IPv6{
		First: binary.BigEndian.Uint64(b[:8]),
		Last:  binary.BigEndian.Uint64(b[8:]),
	}}}
}

// TCPAddressFromProto converts the proxy API's TcpAddress to an address.
func TCPAddressFromProto(a *pbnet.TcpAddress) (netip.AddrPort, error) {
	if a == nil || a.GetIp() == nil {
		return netip.AddrPort{}, fmt.Errorf("model: address without an IP")
	}
	if a.GetPort() == 0 || a.GetPort() > 65535 {
		return netip.AddrPort{}, fmt.Errorf("model: address port %d is out of range", a.GetPort())
	}
	var ip netip.Addr
	switch v := a.GetIp().GetIp().(type) {
	case *pbnet.IPAddress_Ipv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], v.Ipv4)
		ip = netip.AddrFrom4(b)
	case *pbnet.IPAddress_Ipv6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], v.Ipv6.GetFirst())
		binary.BigEndian.PutUint64(b[8:], v.Ipv6.GetLast())
		ip = netip.AddrFrom16(b).Unmap()
	default:
		return netip.AddrPort{}, fmt.Errorf("model: address with an unknown IP kind")
	}
	return netip.AddrPortFrom(ip, uint16(a.GetPort())), nil
}

// EndpointToProto converts an endpoint to the proxy API's WeightedAddr.
func EndpointToProto(e Endpoint) *pb.WeightedAddr {
	wa := &pb.WeightedAddr{
		Addr:         TCPAddressToProto(e.Addr),
		Weight:       e.Weight,
		MetricLabels: e.MetricLabels,
	}
	if e.Identity != "" {
		wa.TlsIdentity = &pb.TlsIdentity{
			Strategy:   &pb.TlsIdentity_DnsLikeIdentity_{DnsLikeIdentity: &pb.TlsIdentity_DnsLikeIdentity{Name: e.Identity}},
			ServerName: &pb.TlsIdentity_DnsLikeIdentity{Name: e.Identity},
		}
	}
	if e.Hint != HintUnknown || e.OpaqueTransportPort != 0 {
		h := &pb.ProtocolHint{}
		switch e.Hint {
		case HintH2:
			h.Protocol = &pb.ProtocolHint_H2_{H2: &pb.ProtocolHint_H2{}}
		case HintOpaque:
			h.Protocol = &pb.ProtocolHint_Opaque_{Opaque: &pb.ProtocolHint_Opaque{}}
		}
		if e.OpaqueTransportPort != 0 {
			h.OpaqueTransport = &pb.ProtocolHint_OpaqueTransport{InboundPort: e.OpaqueTransportPort}
		}
		wa.ProtocolHint = h
	}
	if e.AuthorityOverride != "" {
		wa.AuthorityOverride = &pb.AuthorityOverride{AuthorityOverride: e.AuthorityOverride}
	}
	return wa
}

// EndpointFromProto converts a WeightedAddr to an endpoint. Zone is read
// from the "zone" metric label.
func EndpointFromProto(wa *pb.WeightedAddr) (Endpoint, error) {
	addr, err := TCPAddressFromProto(wa.GetAddr())
	if err != nil {
		return Endpoint{}, err
	}
	e := Endpoint{
		Addr:              addr,
		Weight:            wa.GetWeight(),
		MetricLabels:      wa.GetMetricLabels(),
		AuthorityOverride: wa.GetAuthorityOverride().GetAuthorityOverride(),
		Zone:              wa.GetMetricLabels()["zone"],
	}
	if id := wa.GetTlsIdentity(); id != nil {
		switch s := id.GetStrategy().(type) {
		case *pb.TlsIdentity_DnsLikeIdentity_:
			e.Identity = s.DnsLikeIdentity.GetName()
		case *pb.TlsIdentity_UriLikeIdentity_:
			e.Identity = s.UriLikeIdentity.GetUri()
		}
	}
	if h := wa.GetProtocolHint(); h != nil {
		switch h.GetProtocol().(type) {
		case *pb.ProtocolHint_H2_:
			e.Hint = HintH2
		case *pb.ProtocolHint_Opaque_:
			e.Hint = HintOpaque
		}
		e.OpaqueTransportPort = h.GetOpaqueTransport().GetInboundPort()
	}
	return e, nil
}

// ProfileToProto converts a profile to the proxy API's DestinationProfile.
func ProfileToProto(p Profile) *pb.DestinationProfile {
	out := &pb.DestinationProfile{
		FullyQualifiedName: p.FullyQualifiedName,
		OpaqueProtocol:     p.OpaqueProtocol,
		Routes:             make([]*pb.Route, 0, len(p.Routes)),
		RetryBudget: &pb.RetryBudget{
			RetryRatio:          p.RetryBudget.RetryRatio,
			MinRetriesPerSecond: p.RetryBudget.MinRetriesPerSecond,
			Ttl:                 durationToProto(p.RetryBudget.TTL),
		},
	}
	for _, r := range p.Routes {
		out.Routes = append(out.Routes, &pb.Route{
			Condition:       requestMatchToProto(r.Condition),
			ResponseClasses: responseClassesToProto(r.ResponseClasses),
			MetricsLabels:   map[string]string{"route": r.Name},
			IsRetryable:     r.IsRetryable,
			Timeout:         durationToProto(r.Timeout),
		})
	}
	for _, d := range p.DstOverrides {
		out.DstOverrides = append(out.DstOverrides, &pb.WeightedDst{Authority: d.Authority, Weight: d.Weight})
	}
	if p.Endpoint != nil {
		out.Endpoint = EndpointToProto(*p.Endpoint)
	}
	if p.Service != nil {
		out.ParentRef = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: "core", Kind: "Service", Name: p.Service.Name, Namespace: p.Service.Namespace, Port: p.Port,
		}}}
	}
	if ns, name, ok := strings.Cut(p.Source, "/"); ok {
		out.ProfileRef = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: "linkerd.io", Kind: "ServiceProfile", Name: name, Namespace: ns,
		}}}
	} else if p.Service != nil {
		out.ProfileRef = &meta.Metadata{Kind: &meta.Metadata_Default{Default: "default"}}
	}
	return out
}

func durationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

func responseClassesToProto(rcs []ResponseClass) []*pb.ResponseClass {
	out := make([]*pb.ResponseClass, 0, len(rcs))
	for _, rc := range rcs {
		out = append(out, &pb.ResponseClass{Condition: responseMatchToProto(rc.Condition), IsFailure: rc.IsFailure})
	}
	return out
}

func requestMatchToProto(m RequestMatch) *pb.RequestMatch {
	seq := func(ms []RequestMatch) *pb.RequestMatch_Seq {
		s := &pb.RequestMatch_Seq{}
		for _, x := range ms {
			s.Matches = append(s.Matches, requestMatchToProto(x))
		}
		return s
	}
	switch {
	case m.All != nil:
		return &pb.RequestMatch{Match: &pb.RequestMatch_All{All: seq(m.All)}}
	case m.Any != nil:
		return &pb.RequestMatch{Match: &pb.RequestMatch_Any{Any: seq(m.Any)}}
	case m.Not != nil:
		return &pb.RequestMatch{Match: &pb.RequestMatch_Not{Not: requestMatchToProto(*m.Not)}}
	case m.Method != "":
		return &pb.RequestMatch{Match: &pb.RequestMatch_Method{Method: methodToProto(m.Method)}}
	default:
		return &pb.RequestMatch{Match: &pb.RequestMatch_Path{Path: &pb.PathMatch{Regex: m.PathRegex}}}
	}
}

func methodToProto(m string) *httptypes.HttpMethod {
	if v, ok := httptypes.HttpMethod_Registered_value[m]; ok {
		return &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_Registered(v)}}
	}
	return &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Unregistered{Unregistered: m}}
}

func responseMatchToProto(m ResponseMatch) *pb.ResponseMatch {
	seq := func(ms []ResponseMatch) *pb.ResponseMatch_Seq {
		s := &pb.ResponseMatch_Seq{}
		for _, x := range ms {
			s.Matches = append(s.Matches, responseMatchToProto(x))
		}
		return s
	}
	switch {
	case m.All != nil:
		return &pb.ResponseMatch{Match: &pb.ResponseMatch_All{All: seq(m.All)}}
	case m.Any != nil:
		return &pb.ResponseMatch{Match: &pb.ResponseMatch_Any{Any: seq(m.Any)}}
	case m.Not != nil:
		return &pb.ResponseMatch{Match: &pb.ResponseMatch_Not{Not: responseMatchToProto(*m.Not)}}
	default:
		s := m.Status
		if s == nil {
			s = &StatusRange{}
		}
		return &pb.ResponseMatch{Match: &pb.ResponseMatch_Status{Status: &pb.HttpStatusRange{Min: s.Min, Max: s.Max}}}
	}
}

// ProfileFromProto converts a DestinationProfile to a profile, for
// clients. Route conditions are converted as far as the model goes.
func ProfileFromProto(dp *pb.DestinationProfile) Profile {
	p := Profile{
		FullyQualifiedName: dp.GetFullyQualifiedName(),
		OpaqueProtocol:     dp.GetOpaqueProtocol(),
		RetryBudget: RetryBudget{
			RetryRatio:          dp.GetRetryBudget().GetRetryRatio(),
			MinRetriesPerSecond: dp.GetRetryBudget().GetMinRetriesPerSecond(),
			TTL:                 dp.GetRetryBudget().GetTtl().AsDuration(),
		},
	}
	for _, r := range dp.GetRoutes() {
		rt := Route{
			Name:        r.GetMetricsLabels()["route"],
			Condition:   requestMatchFromProto(r.GetCondition()),
			IsRetryable: r.GetIsRetryable(),
			Timeout:     r.GetTimeout().AsDuration(),
		}
		for _, rc := range r.GetResponseClasses() {
			rt.ResponseClasses = append(rt.ResponseClasses, ResponseClass{Condition: responseMatchFromProto(rc.GetCondition()), IsFailure: rc.GetIsFailure()})
		}
		p.Routes = append(p.Routes, rt)
	}
	for _, d := range dp.GetDstOverrides() {
		p.DstOverrides = append(p.DstOverrides, WeightedDst{Authority: d.GetAuthority(), Weight: d.GetWeight()})
	}
	if dp.GetEndpoint() != nil {
		if e, err := EndpointFromProto(dp.GetEndpoint()); err == nil {
			p.Endpoint = &e
		}
	}
	if r := dp.GetParentRef().GetResource(); r != nil && r.GetKind() == "Service" {
		p.Service = &ServiceID{Namespace: r.GetNamespace(), Name: r.GetName()}
		p.Port = r.GetPort()
	}
	if r := dp.GetProfileRef().GetResource(); r != nil {
		p.Source = r.GetNamespace() + "/" + r.GetName()
	}
	return p
}

func requestMatchFromProto(m *pb.RequestMatch) RequestMatch {
	var out RequestMatch
	switch v := m.GetMatch().(type) {
	case *pb.RequestMatch_All:
		out.All = []RequestMatch{}
		for _, x := range v.All.GetMatches() {
			out.All = append(out.All, requestMatchFromProto(x))
		}
	case *pb.RequestMatch_Any:
		out.Any = []RequestMatch{}
		for _, x := range v.Any.GetMatches() {
			out.Any = append(out.Any, requestMatchFromProto(x))
		}
	case *pb.RequestMatch_Not:
		n := requestMatchFromProto(v.Not)
		out.Not = &n
	case *pb.RequestMatch_Path:
		out.PathRegex = v.Path.GetRegex()
	case *pb.RequestMatch_Method:
		if r, ok := v.Method.GetType().(*httptypes.HttpMethod_Registered_); ok {
			out.Method = r.Registered.String()
		} else {
			out.Method = v.Method.GetUnregistered()
		}
	}
	return out
}

func responseMatchFromProto(m *pb.ResponseMatch) ResponseMatch {
	var out ResponseMatch
	switch v := m.GetMatch().(type) {
	case *pb.ResponseMatch_All:
		out.All = []ResponseMatch{}
		for _, x := range v.All.GetMatches() {
			out.All = append(out.All, responseMatchFromProto(x))
		}
	case *pb.ResponseMatch_Any:
		out.Any = []ResponseMatch{}
		for _, x := range v.Any.GetMatches() {
			out.Any = append(out.Any, responseMatchFromProto(x))
		}
	case *pb.ResponseMatch_Not:
		n := responseMatchFromProto(v.Not)
		out.Not = &n
	case *pb.ResponseMatch_Status:
		out.Status = &StatusRange{Min: v.Status.GetMin(), Max: v.Status.GetMax()}
	}
	return out
}
