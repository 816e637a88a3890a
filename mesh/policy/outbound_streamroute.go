package policy

import (
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/opaqueroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tlsroute"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// How TCPRoutes and TLSRoutes are served on the Outbound API, as
// Linkerd's controller serves them (linkerd2 version-2.20, policy-
// controller grpc outbound tcp.rs and tls.rs):
//
//   - A port without appProtocol, no GRPCRoute and no HTTPRoute, but with
//     TLSRoutes, becomes ProxyProtocol.Tls: every TLSRoute (oldest first,
//     then by name), each with its SNI matches; under an EgressNetwork the
//     default route tls-egress-allow|deny comes last.
//   - Such a port with TCPRoutes and no TLSRoute, or an opaque port (the
//     opaque-ports annotation, appProtocol linkerd.io/opaque or one
//     Linkerd does not know) with TCPRoutes, becomes ProxyProtocol.Opaque
//     with the first TCPRoute only: a TCPRoute has nothing to select by,
//     so Linkerd serves one.
//   - A route's one rule sends to its backends by weight (RandomAvailable),
//     or to the parent's backend when it has none (FirstAvailable). A
//     backend the controller cannot resolve (a Service that does not
//     exist, an EgressNetwork that is not the parent, a backend without a
//     port) is served with an Invalid filter and its message, so that the
//     proxy refuses the connections its weight gives it.
//
// The Opaque and Tls protocols of v0.20 carry no failure accrual.

// maxTCPRoutes is how many TCPRoutes a port serves (Linkerd's limit).
const maxTCPRoutes = 1

// streamBackend is one weighted backend of a stream route: the backend the
// proxy connects to, or why there is none.
type streamBackend struct {
	weight  uint32
	backend *outbound.Backend
	invalid string
}

// invalidBackend stands for a backend the controller cannot resolve: no
// endpoint to connect to, and the metadata of what the route named (a
// Service or an EgressNetwork, with its port), as Linkerd serves it.
func invalidBackend(si *serviceInfo, ns string, br gatewayv1.BackendRef) *outbound.Backend {
	md := defaultMeta("invalid")
	if br.Namespace != nil && *br.Namespace != "" {
		ns = string(*br.Namespace)
	}
	group, kind := "", "Service"
	if br.Group != nil {
		group = string(*br.Group)
	}
	if br.Kind != nil {
		kind = string(*br.Kind)
	}
	var port uint16
	if br.Port != nil && *br.Port > 0 {
		port = uint16(*br.Port)
	}
	switch {
	case isEgressBackend(br):
		if port == 0 && si.egress != nil {
			port = si.egress.dst.Port()
		}
		md = egressMeta(ns, string(br.Name), port)
	case isCoreGroup(group) && kind == "Service":
		md = serviceMeta(ns, string(br.Name), port)
	}
	return &outbound.Backend{Metadata: md, Queue: defaultQueue()}
}

func (ix *Index) streamBackends(si *serviceInfo, r *streamRoute) []streamBackend {
	var out []streamBackend
	for _, br := range r.backends {
		// Linkerd's stream backends balance on the plain estimator:
		// the load biases are about HTTP responses.
		b, w, invalid := ix.routeBackendFor(si, r.meta.Namespace, br, balancerLoad(nil, true))
		if invalid != "" {
			b = invalidBackend(si, r.meta.Namespace, br)
		}
		out = append(out, streamBackend{weight: w, backend: b, invalid: invalid})
	}
	return out
}

func routeResourceMeta(m authz.Meta) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: m.Group, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name}}}
}

// tcpProtocol is ProxyProtocol.Opaque for the TCPRoutes of a port.
func (ix *Index) tcpProtocol(si *serviceInfo, as []*streamAttach, backend *outbound.Backend) *outbound.ProxyProtocol_Opaque {
	if len(as) > maxTCPRoutes {
		as = as[:maxTCPRoutes]
	}
	out := &outbound.ProxyProtocol_Opaque{}
	for _, a := range as {
		rule := &outbound.OpaqueRoute_Rule{}
		bs := ix.streamBackends(si, a.r)
		if len(bs) == 0 {
			rule.Backends = &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_FirstAvailable_{
				FirstAvailable: &outbound.OpaqueRoute_Distribution_FirstAvailable{Backends: []*outbound.OpaqueRoute_RouteBackend{{Backend: backend}}}}}
		} else {
			var wbs []*outbound.OpaqueRoute_WeightedRouteBackend
			for _, b := range bs {
				rb := &outbound.OpaqueRoute_RouteBackend{Backend: b.backend}
				if b.invalid != "" {
					rb.Filters = []*outbound.OpaqueRoute_Filter{{Kind: &outbound.OpaqueRoute_Filter_Invalid{Invalid: &opaqueroute.Invalid{Message: b.invalid}}}}
				}
				wbs = append(wbs, &outbound.OpaqueRoute_WeightedRouteBackend{Weight: b.weight, Backend: rb})
			}
			rule.Backends = &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_RandomAvailable_{
				RandomAvailable: &outbound.OpaqueRoute_Distribution_RandomAvailable{Backends: wbs}}}
		}
		out.Routes = append(out.Routes, &outbound.OpaqueRoute{Metadata: routeResourceMeta(a.r.meta), Rules: []*outbound.OpaqueRoute_Rule{rule}})
	}
	return out
}

// tlsProtocol is ProxyProtocol.Tls for the TLSRoutes of a port.
func (ix *Index) tlsProtocol(si *serviceInfo, as []*streamAttach, backend *outbound.Backend) *outbound.ProxyProtocol_Tls {
	out := &outbound.ProxyProtocol_Tls{}
	for _, a := range as {
		rule := &outbound.TlsRoute_Rule{}
		bs := ix.streamBackends(si, a.r)
		if len(bs) == 0 {
			rule.Backends = firstTLS(backend)
		} else {
			var wbs []*outbound.TlsRoute_WeightedRouteBackend
			for _, b := range bs {
				rb := &outbound.TlsRoute_RouteBackend{Backend: b.backend}
				if b.invalid != "" {
					rb.Filters = []*outbound.TlsRoute_Filter{{Kind: &outbound.TlsRoute_Filter_Invalid{Invalid: &opaqueroute.Invalid{Message: b.invalid}}}}
				}
				wbs = append(wbs, &outbound.TlsRoute_WeightedRouteBackend{Weight: b.weight, Backend: rb})
			}
			rule.Backends = &outbound.TlsRoute_Distribution{Kind: &outbound.TlsRoute_Distribution_RandomAvailable_{
				RandomAvailable: &outbound.TlsRoute_Distribution_RandomAvailable{Backends: wbs}}}
		}
		out.Routes = append(out.Routes, &outbound.TlsRoute{Metadata: routeResourceMeta(a.r.meta), Snis: snisToProto(a.r.snis), Rules: []*outbound.TlsRoute_Rule{rule}})
	}
	return out
}

func firstTLS(backend *outbound.Backend) *outbound.TlsRoute_Distribution {
	return &outbound.TlsRoute_Distribution{Kind: &outbound.TlsRoute_Distribution_FirstAvailable_{
		FirstAvailable: &outbound.TlsRoute_Distribution_FirstAvailable{Backends: []*outbound.TlsRoute_RouteBackend{{Backend: backend}}}}}
}

// egressTLSRoute is an EgressNetwork's default TLS route, last of its
// Tls protocol: every SNI, to the original destination, refused under
// Deny.
func egressTLSRoute(backend *outbound.Backend, deny bool) *outbound.TlsRoute {
	rule := &outbound.TlsRoute_Rule{Backends: firstTLS(backend)}
	if deny {
		rule.Filters = []*outbound.TlsRoute_Filter{{Kind: &outbound.TlsRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}}
	}
	return &outbound.TlsRoute{Metadata: defaultMeta(allowDeny("tls", deny)), Rules: []*outbound.TlsRoute_Rule{rule}}
}

// snisToProto renders SNI matches: an exact name, or a suffix as its
// labels from the top ("*.example.com" is com, example).
func snisToProto(hs []authz.HostMatch) []*tlsroute.SniMatch {
	var out []*tlsroute.SniMatch
	for _, h := range hs {
		if !h.Suffix {
			out = append(out, &tlsroute.SniMatch{Match: &tlsroute.SniMatch_Exact{Exact: h.Value}})
			continue
		}
		labels := strings.Split(h.Value, ".")
		rev := make([]string, 0, len(labels))
		for i := len(labels) - 1; i >= 0; i-- {
			rev = append(rev, labels[i])
		}
		out = append(out, &tlsroute.SniMatch{Match: &tlsroute.SniMatch_Suffix_{Suffix: &tlsroute.SniMatch_Suffix{ReverseLabels: rev}}})
	}
	return out
}
