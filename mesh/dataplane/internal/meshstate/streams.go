package meshstate

import (
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// A destination's stream routes (TLSRoutes and TCPRoutes, compiled by
// route.CompileStream) are read by the L4 outbound path, which routes
// whole connections by them.

// compiledStreams is one policy's stream routes, compiled.
type compiledStreams struct {
	pol *outbound.OutboundPolicy
	st  *route.Stream
	err error
}

// StreamRoutes returns the service's policy and its stream routes
// (route.CompileStream), compiled once per policy received: a Stream is
// read-only once compiled, so connections share it.
func (s *Service) StreamRoutes() (*outbound.OutboundPolicy, *route.Stream, error) {
	pol := s.Policy()
	if c := s.streams.Load(); c != nil && c.pol == pol {
		return pol, c.st, c.err
	}
	st, err := route.CompileStream(pol)
	s.streams.Store(&compiledStreams{pol: pol, st: st, err: err})
	return pol, st, err
}

// OpaqueRouteOf returns the route an opaque connection follows when no
// TCPRoute or TLSRoute takes it: the first route of the policy's Opaque
// protocol, or of Detect's opaque fallback (the route Linkerd's proxy
// uses for a connection that is not HTTP). nil when the policy has none.
func OpaqueRouteOf(pol *outbound.OutboundPolicy) *outbound.OpaqueRoute {
	routes := pol.GetProtocol().GetOpaque().GetRoutes()
	if det := pol.GetProtocol().GetDetect(); det != nil {
		routes = det.GetOpaque().GetRoutes()
	}
	if len(routes) == 0 {
		return nil
	}
	return routes[0]
}
