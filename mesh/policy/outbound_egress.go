package policy

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/opaqueroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// What a proxy refuses egress traffic with, as Linkerd's controller
// sends it: a failure injector for HTTP (403) and gRPC (PERMISSION_DENIED),
// a forbidden filter for opaque traffic.
const (
	egressDenyMessage  = "traffic not allowed"
	egressDenyStatus   = 403
	egressDenyGRPCCode = 7
)

// egressParent is the EgressNetwork a policy is computed for, with the
// destination the proxy asked about: the one place its route backends
// (and its default backend) forward to.
type egressParent struct {
	ns, name string
	dst      netip.AddrPort
}

// EgressNetworkFor returns the EgressNetwork that applies to a client in
// namespace srcNS connecting to addr, as Linkerd picks it: if any
// EgressNetwork is in srcNS, only those are considered, otherwise only
// those of the global egress namespace (Config.GlobalEgressNamespace);
// among the candidates whose networks contain addr, the one with the
// smallest matching network wins, then the oldest, then namespace and
// name. ok is false when none applies (the destination then gets the
// "egress-fallback" policy, which forwards everything).
//
// Addresses of Services never get here: the outbound API answers them
// with the Service's policy.
func (ix *Index) EgressNetworkFor(addr netip.Addr, srcNS string) (ref ObjectRef, ok bool) {
	if e := ix.outbound.egressFor(addr, srcNS); e != nil {
		return e.ref, true
	}
	return ObjectRef{}, false
}

func (ox *outboundIndex) egressFor(addr netip.Addr, srcNS string) *egressNet {
	addr = addr.Unmap()
	ns := ox.cfg.GlobalEgressNamespace
	for _, e := range ox.egress {
		if e.ref.Namespace == srcNS {
			ns = srcNS
			break
		}
	}
	var best *egressNet
	var bestSize *big.Int
	for _, e := range ox.egress {
		if e.ref.Namespace != ns {
			continue
		}
		size := e.matchSize(addr)
		if size == nil {
			continue
		}
		if best == nil || size.Cmp(bestSize) < 0 || (size.Cmp(bestSize) == 0 && olderFirst(&e.obj.ObjectMeta, &best.obj.ObjectMeta)) {
			best, bestSize = e, size
		}
	}
	return best
}

// addrPolicy is the policy of an address that is no Service's: its
// EgressNetwork's, or the fallback that forwards everything.
func (ix *Index) addrPolicy(t OutboundTarget) *outbound.OutboundPolicy {
	e := ix.outbound.egressFor(t.Addr.Addr(), t.SourceNamespace)
	if e == nil {
		return fallbackPolicy(t.Addr, ix.cfg.DetectTimeout)
	}
	return ix.egressPolicy(e, t.Addr)
}

func egressMeta(ns, name string, port uint16) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: policyGroup, Kind: "EgressNetwork", Namespace: ns, Name: name, Port: uint32(port)}}}
}

func forwardBackend(md *meta.Metadata, dst netip.AddrPort, weight uint32) *outbound.Backend {
	return &outbound.Backend{Metadata: md, Queue: defaultQueue(), Kind: &outbound.Backend_Forward{Forward: &destination.WeightedAddr{
		Addr: &pnet.TcpAddress{Ip: authz.AddrToProto(dst.Addr()), Port: uint32(dst.Port())}, Weight: weight,
	}}}
}

// egressPolicy is what Linkerd's controller serves for dst under e: the
// default backend forwards to dst; the routes attached to e for dst's
// port come first, then a default route that forwards (Allow) or refuses
// (Deny) the rest. An opaque port (e's opaque-ports annotation, else the
// cluster's default list) gets the opaque default route only; GRPCRoutes
// make the protocol gRPC; otherwise the proxy detects HTTP.
func (ix *Index) egressPolicy(e *egressNet, dst netip.AddrPort) *outbound.OutboundPolicy {
	ns, name, port := e.ref.Namespace, e.ref.Name, dst.Port()
	md := egressMeta(ns, name, port)
	backend := forwardBackend(md, dst, 1)
	forPort := func(rs []*outboundRoute) []*outboundRoute {
		var out []*outboundRoute
		for _, r := range rs {
			if r.port == 0 || r.port == int32(port) {
				out = append(out, r)
			}
		}
		return out
	}
	// The EgressNetwork stands in for a Service: its annotations give the
	// retries, timeouts and failure accrual of its routes. Its default
	// backend has no balancer, so no load bias applies.
	si := &serviceInfo{accrual: e.accrual, retry: e.retry, timeouts: e.timeouts,
		http: forPort(e.http), grpc: forPort(e.grpc), egress: &egressParent{ns: ns, name: name, dst: dst}}
	accrual := si.accrual.proto()
	opaque := &outbound.ProxyProtocol_Opaque{Routes: []*outbound.OpaqueRoute{egressOpaqueRoute(backend, e.deny)}}
	// TCPRoutes and TLSRoutes as for a Service (outbound_streamroute.go);
	// the Tls protocol ends with the EgressNetwork's default route.
	tcpRoutes, tlsRoutes := streamsFor(e.tcp, port), streamsFor(e.tls, port)
	streams := len(si.http) == 0 && len(si.grpc) == 0
	pp := &outbound.ProxyProtocol{}
	switch {
	case e.opaque.Contains(uint32(port)) && len(tcpRoutes) > 0:
		pp.Kind = &outbound.ProxyProtocol_Opaque_{Opaque: ix.tcpProtocol(si, tcpRoutes, backend)}
	case e.opaque.Contains(uint32(port)):
		pp.Kind = &outbound.ProxyProtocol_Opaque_{Opaque: opaque}
	case streams && len(tlsRoutes) > 0:
		tls := ix.tlsProtocol(si, tlsRoutes, backend)
		tls.Routes = append(tls.Routes, egressTLSRoute(backend, e.deny))
		pp.Kind = &outbound.ProxyProtocol_Tls_{Tls: tls}
	case streams && len(tcpRoutes) > 0:
		pp.Kind = &outbound.ProxyProtocol_Opaque_{Opaque: ix.tcpProtocol(si, tcpRoutes, backend)}
	case len(si.grpc) > 0:
		routes := append(ix.outboundGRPCRoutes(si, si.grpc, backend), ix.egressGRPCRoute(si, backend, e.deny))
		pp.Kind = &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{Routes: routes, FailureAccrual: accrual}}
	default:
		var routes []*outbound.HttpRoute
		if len(si.http) > 0 {
			routes = ix.outboundHTTPRoutes(si, si.http, backend)
		}
		routes = append(routes, ix.egressHTTPRoute(si, backend, e.deny))
		pp.Kind = &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
			Timeout: dur(ix.cfg.DetectTimeout),
			Opaque:  opaque,
			Http1:   &outbound.ProxyProtocol_Http1{Routes: routes, FailureAccrual: accrual},
			Http2:   &outbound.ProxyProtocol_Http2{Routes: routes, FailureAccrual: accrual},
		}}
	}
	return &outbound.OutboundPolicy{Metadata: md, Protocol: pp}
}

func allowDeny(prefix string, deny bool) string {
	if deny {
		return prefix + "-egress-deny"
	}
	return prefix + "-egress-allow"
}

// egressHTTPRoute is the EgressNetwork's default HTTP route: the route a
// Service without routes gets (every path, the parent's retries and
// timeouts), named http-egress-allow or http-egress-deny, with a 403
// failure injector when it denies.
func (ix *Index) egressHTTPRoute(si *serviceInfo, backend *outbound.Backend, deny bool) *outbound.HttpRoute {
	r := ix.outboundHTTPRoutes(si, nil, backend)[0]
	r.Metadata = defaultMeta(allowDeny("http", deny))
	if deny {
		r.Rules[0].Filters = []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{
			FailureInjector: &httproute.HttpFailureInjector{Status: egressDenyStatus, Message: egressDenyMessage}}}}
	}
	return r
}

// egressGRPCRoute is the gRPC counterpart: one rule matching every call,
// with the parent's retries and timeouts, refusing with PERMISSION_DENIED
// when it denies.
func (ix *Index) egressGRPCRoute(si *serviceInfo, backend *outbound.Backend, deny bool) *outbound.GrpcRoute {
	// A route of one rule without matches or backends converts to exactly
	// that rule.
	r := ix.outboundGRPCRoutes(si, []*outboundRoute{{grpc: []authz.GRPCRule{{}}}}, backend)[0]
	r.Metadata, r.Hosts = defaultMeta(allowDeny("grpc", deny)), nil
	if deny {
		r.Rules[0].Filters = []*outbound.GrpcRoute_Filter{{Kind: &outbound.GrpcRoute_Filter_FailureInjector{
			FailureInjector: &grpcroute.GrpcFailureInjector{Code: egressDenyGRPCCode, Message: egressDenyMessage}}}}
	}
	return r
}

// egressOpaqueRoute forwards opaque traffic to the default backend, or
// forbids it.
func egressOpaqueRoute(backend *outbound.Backend, deny bool) *outbound.OpaqueRoute {
	rule := &outbound.OpaqueRoute_Rule{Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_FirstAvailable_{
		FirstAvailable: &outbound.OpaqueRoute_Distribution_FirstAvailable{Backends: []*outbound.OpaqueRoute_RouteBackend{{Backend: backend}}},
	}}}
	if deny {
		rule.Filters = []*outbound.OpaqueRoute_Filter{{Kind: &outbound.OpaqueRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}}
	}
	return &outbound.OpaqueRoute{Metadata: defaultMeta(allowDeny("tcp", deny)), Rules: []*outbound.OpaqueRoute_Rule{rule}}
}

func isEgressBackend(br gatewayv1.BackendRef) bool {
	return br.Group != nil && strings.EqualFold(string(*br.Group), policyGroup) && br.Kind != nil && strings.EqualFold(string(*br.Kind), "EgressNetwork")
}

// routeBackendFor is backendFor with EgressNetwork backends: a route of
// an EgressNetwork may name that same EgressNetwork, which forwards to
// the destination the proxy asked about; any other EgressNetwork backend
// is invalid, as in Linkerd.
func (ix *Index) routeBackendFor(si *serviceInfo, ns string, br gatewayv1.BackendRef, load func(*outbound.Backend_BalanceP2C)) (*outbound.Backend, uint32, string) {
	if !isEgressBackend(br) {
		return ix.backendFor(ns, br, load)
	}
	weight := uint32(1)
	if br.Weight != nil {
		if *br.Weight < 0 {
			return nil, 0, "negative weight"
		}
		weight = uint32(*br.Weight)
	}
	eg := si.egress
	if eg == nil {
		return nil, weight, "EgressNetwork backends attach to EgressNetwork parents only"
	}
	bns := ns
	if br.Namespace != nil && *br.Namespace != "" {
		bns = string(*br.Namespace)
	}
	if bns != eg.ns || string(br.Name) != eg.name {
		return nil, weight, fmt.Sprintf("Route with EgressNetwork backend needs to have the same EgressNetwork as a parent (%s/%s)", eg.ns, eg.name)
	}
	// The backend's port only names it; traffic goes to the destination
	// the proxy asked about, as Linkerd's controller sends it.
	port := eg.dst.Port()
	if br.Port != nil && *br.Port > 0 {
		port = uint16(*br.Port)
	}
	return forwardBackend(egressMeta(eg.ns, eg.name, port), eg.dst, weight), weight, ""
}
