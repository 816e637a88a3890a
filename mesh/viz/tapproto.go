package viz

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"strings"

	"google.golang.org/grpc"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	netpb "github.com/weftmesh/weft/apis/proxy/net"
	tappb "github.com/weftmesh/weft/apis/proxy/tap"
)

// ObserveRequest converts req into the proxy API's request: a conjunction
// of the filter's HTTP matches (method, exact authority, path prefix),
// with headers extracted when asked.
func ObserveRequest(req TapRequest) *tappb.ObserveRequest {
	var all []*tappb.ObserveRequest_Match
	httpMatch := func(h *tappb.ObserveRequest_Match_Http) {
		all = append(all, &tappb.ObserveRequest_Match{Match: &tappb.ObserveRequest_Match_Http_{Http: h}})
	}
	if m := req.Filter.Method; m != "" {
		hm := &httptypes.HttpMethod{}
		if v, ok := httptypes.HttpMethod_Registered_value[strings.ToUpper(m)]; ok {
			hm.Type = &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_Registered(v)}
		} else {
			hm.Type = &httptypes.HttpMethod_Unregistered{Unregistered: m}
		}
		httpMatch(&tappb.ObserveRequest_Match_Http{Match: &tappb.ObserveRequest_Match_Http_Method{Method: hm}})
	}
	if a := req.Filter.Authority; a != "" {
		httpMatch(&tappb.ObserveRequest_Match_Http{Match: &tappb.ObserveRequest_Match_Http_Authority{
			Authority: &tappb.ObserveRequest_Match_Http_StringMatch{Match: &tappb.ObserveRequest_Match_Http_StringMatch_Exact{Exact: a}}}})
	}
	if p := req.Filter.PathPrefix; p != "" {
		httpMatch(&tappb.ObserveRequest_Match_Http{Match: &tappb.ObserveRequest_Match_Http_Path{
			Path: &tappb.ObserveRequest_Match_Http_StringMatch{Match: &tappb.ObserveRequest_Match_Http_StringMatch_Prefix{Prefix: p}}}})
	}
	limit := req.Limit
	if limit == 0 {
		// The proxy refuses a zero limit; "no limit of our own" is the
		// largest one (the proxy still bounds the events per second).
		limit = math.MaxUint32
	}
	out := &tappb.ObserveRequest{Limit: limit, Match: &tappb.ObserveRequest_Match{
		Match: &tappb.ObserveRequest_Match_All{All: &tappb.ObserveRequest_Match_Seq{Matches: all}},
	}}
	if req.Headers {
		out.Extract = &tappb.ObserveRequest_Extract{Extract: &tappb.ObserveRequest_Extract_Http_{Http: &tappb.ObserveRequest_Extract_Http{
			Extract: &tappb.ObserveRequest_Extract_Http_Headers_{Headers: &tappb.ObserveRequest_Extract_Http_Headers{}}}}}
	}
	return out
}

// ErrNotHTTP is returned by EventFromProto for a tap event that carries no
// HTTP event (the API has no other kind today).
var ErrNotHTTP = errors.New("viz: tap event without an HTTP event")

// MaxTapHeaders bounds the headers kept from one tap event.
const MaxTapHeaders = 64

// EventFromProto decodes a TapEvent that proxy (the tapped pod) sent.
// Peers are enriched with what ix knows of their addresses (pod,
// namespace, workload), without overwriting the labels the proxy sent.
func EventFromProto(proxy Target, ev *tappb.TapEvent, ix *Addresses) (Event, error) {
	e := Event{Proxy: proxy.Key()}
	switch ev.GetProxyDirection() {
	case tappb.TapEvent_INBOUND:
		e.Direction = "inbound"
	case tappb.TapEvent_OUTBOUND:
		e.Direction = "outbound"
	default:
		e.Direction = "unknown"
	}
	e.Source = tcpAddr(ev.GetSource())
	e.Destination = tcpAddr(ev.GetDestination())
	e.SourceMeta = ix.enrich(ev.GetSourceMeta().GetLabels(), e.Source.Addr())
	e.DestinationMeta = ix.enrich(ev.GetDestinationMeta().GetLabels(), e.Destination.Addr())
	if l := ev.GetRouteMeta().GetLabels(); len(l) > 0 {
		e.RouteMeta = maps.Clone(l)
	}
	h := ev.GetHttp()
	if h == nil {
		return e, ErrNotHTTP
	}
	switch x := h.GetEvent().(type) {
	case *tappb.TapEvent_Http_RequestInit_:
		r := x.RequestInit
		e.Kind = RequestInit
		e.StreamBase, e.Stream = r.GetId().GetBase(), r.GetId().GetStream()
		e.Method = methodString(r.GetMethod())
		e.Scheme = schemeString(r.GetScheme())
		e.Authority, e.Path = r.GetAuthority(), r.GetPath()
		e.Headers = headers(r.GetHeaders())
	case *tappb.TapEvent_Http_ResponseInit_:
		r := x.ResponseInit
		e.Kind = ResponseInit
		e.StreamBase, e.Stream = r.GetId().GetBase(), r.GetId().GetStream()
		e.Status = r.GetHttpStatus()
		e.SinceRequest = r.GetSinceRequestInit().AsDuration()
		e.Headers = headers(r.GetHeaders())
	case *tappb.TapEvent_Http_ResponseEnd_:
		r := x.ResponseEnd
		e.Kind = ResponseEnd
		e.StreamBase, e.Stream = r.GetId().GetBase(), r.GetId().GetStream()
		e.SinceRequest = r.GetSinceRequestInit().AsDuration()
		e.SinceResponse = r.GetSinceResponseInit().AsDuration()
		e.ResponseBytes = r.GetResponseBytes()
		switch end := r.GetEos().GetEnd().(type) {
		case *tappb.Eos_GrpcStatusCode:
			v := end.GrpcStatusCode
			e.GRPCStatus = &v
		case *tappb.Eos_ResetErrorCode:
			v := end.ResetErrorCode
			e.ResetCode = &v
		}
		e.Trailers = headers(r.GetTrailers())
	default:
		return e, ErrNotHTTP
	}
	return e, nil
}

func tcpAddr(a *netpb.TcpAddress) netip.AddrPort {
	if a == nil || a.GetIp() == nil || a.GetPort() > 65535 {
		return netip.AddrPort{}
	}
	var ip netip.Addr
	switch x := a.GetIp().GetIp().(type) {
	case *netpb.IPAddress_Ipv4:
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], x.Ipv4)
		ip = netip.AddrFrom4(b)
	case *netpb.IPAddress_Ipv6:
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], x.Ipv6.GetFirst())
		binary.BigEndian.PutUint64(b[8:], x.Ipv6.GetLast())
		ip = netip.AddrFrom16(b).Unmap()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip, uint16(a.GetPort()))
}

func methodString(m *httptypes.HttpMethod) string {
	switch x := m.GetType().(type) {
	case *httptypes.HttpMethod_Registered_:
		return x.Registered.String()
	case *httptypes.HttpMethod_Unregistered:
		return x.Unregistered
	}
	return ""
}

func schemeString(s *httptypes.Scheme) string {
	switch x := s.GetType().(type) {
	case *httptypes.Scheme_Registered_:
		return strings.ToLower(x.Registered.String())
	case *httptypes.Scheme_Unregistered:
		return x.Unregistered
	}
	return ""
}

func headers(h *httptypes.Headers) []Header {
	var out []Header
	for _, x := range h.GetHeaders() {
		if len(out) >= MaxTapHeaders {
			break
		}
		out = append(out, Header{Name: x.GetName(), Value: string(x.GetValue())})
	}
	return out
}

// Addresses maps pod addresses to what viz knows of the pods, to name the
// peers of tap events.
type Addresses struct {
	byIP map[netip.Addr]Target
	// byID holds, per mesh identity, the workload labels of its pods when
	// they all belong to one workload (nil when they do not).
	byID map[string]map[string]string
}

// NewAddresses indexes targets by IP and by identity.
func NewAddresses(ts []Target) *Addresses {
	a := &Addresses{byIP: map[netip.Addr]Target{}, byID: map[string]map[string]string{}}
	for _, t := range ts {
		if t.IP.IsValid() {
			a.byIP[t.IP] = t
		}
		if t.Identity == "" {
			continue
		}
		l := t.Labels()
		delete(l, "pod")
		prev, seen := a.byID[t.Identity]
		switch {
		case !seen:
			a.byID[t.Identity] = l
		case prev != nil && !maps.Equal(prev, l):
			a.byID[t.Identity] = nil // two workloads share the identity
		}
	}
	return a
}

// enrich adds to a peer's labels what the targets say of its address: the
// pod and its workload. A peer whose address is no pod's (a proxy that
// dialled from another address, as in a local mesh) is named by the
// identity its proxy verified (client_id or server_id) when exactly one
// workload holds that identity.
func (a *Addresses) enrich(l map[string]string, ip netip.Addr) map[string]string {
	out := maps.Clone(l)
	if a == nil {
		return out
	}
	var add map[string]string
	if t, ok := a.byIP[ip.Unmap()]; ok {
		add = t.Labels()
	} else if id := firstOf(l, "client_id", "server_id"); id != "" {
		add = a.byID[id]
	}
	if add == nil {
		return out
	}
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range add {
		if _, set := out[k]; !set {
			out[k] = v
		}
	}
	return out
}

func firstOf(l map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := l[k]; v != "" {
			return v
		}
	}
	return ""
}

// GRPCTap observes one proxy's tap server over conn (a connection the
// caller dialled with the credentials the proxy accepts for tappers).
func GRPCTap(ctx context.Context, conn grpc.ClientConnInterface, t Target, req TapRequest, ix *Addresses) (EventStream, error) {
	stream, err := tappb.NewTapClient(conn).Observe(ctx, ObserveRequest(req))
	if err != nil {
		return nil, fmt.Errorf("viz: tap %s: %w", t, err)
	}
	return &grpcStream{s: stream, t: t, ix: ix}, nil
}

type grpcStream struct {
	s  tappb.Tap_ObserveClient
	t  Target
	ix *Addresses
}

// Recv returns the next HTTP event; events of other kinds are skipped.
func (g *grpcStream) Recv() (Event, error) {
	for {
		ev, err := g.s.Recv()
		if err != nil {
			return Event{}, err
		}
		e, err := EventFromProto(g.t, ev, g.ix)
		if errors.Is(err, ErrNotHTTP) {
			continue
		}
		return e, err
	}
}
