package meshstate

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// Egress: an outbound connection to an address that discovery does not
// know (no Service has it) is forwarded to its original destination. With
// an outbound policy source, the proxy first asks the policy controller
// about the address, as Linkerd's proxy does: when an EgressNetwork
// covers it, the connection follows that policy like a Service's (HTTP
// routes with their filters and backends, the default route refusing
// with 403 under Deny), and opaque traffic is refused where the policy
// forbids it. The fallback answer ("egress-fallback", no EgressNetwork),
// no answer in time, or none at all keep the old path: forwarded as is.

// RefuseForbidden is the tcp_refused_total reason of opaque connections
// an outbound policy forbids (an EgressNetwork with trafficPolicy Deny, a
// Forbidden filter on a stream route).
const RefuseForbidden = "forbidden"

// egressKey keeps egress destinations apart from discovery's in the
// destinations map.
const egressKey = "egress\x00"

// EgressDest returns a destination for target (an IP:port nobody
// discovers) whose one endpoint is addr in plaintext, when the outbound
// policy of target is an EgressNetwork's; nil otherwise, and the caller
// forwards the connection as is. An EgressNetwork policy the proxy cannot
// read is an error: the connection is refused rather than forwarded
// under a router that may not be that policy's (fail closed). The caller
// releases what it gets.
func (st *State) EgressDest(ctx context.Context, target string, addr netip.AddrPort) (*Destination, error) {
	d := st.dests.Fixed(egressKey+target, target, []endpoint.Endpoint{{Addr: addr}}, func(x *Ext) { x.egress = true })
	if d == nil {
		return nil, nil // the proxy is stopping
	}

	pol := st.Service(ctx, d).Policy()
	if !isEgressNetwork(pol) {
		d.Release()
		return nil, nil
	}
	if d.Ext.egressRead.Load() != pol {
		// Checked once per policy received.
		if _, err := route.Compile(pol, nil, target); err != nil {
			d.Release()
			return nil, fmt.Errorf("dataplane: the EgressNetwork policy of %s cannot be read, the connection is refused: %w", target, err)
		}
		d.Ext.egressRead.Store(pol)
	}
	return d, nil
}

// Policy returns the last outbound policy the service received, or nil.
func (s *Service) Policy() *outbound.OutboundPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pol
}

// isEgressNetwork reports whether pol is an EgressNetwork's policy.
func isEgressNetwork(pol *outbound.OutboundPolicy) bool {
	r := pol.GetMetadata().GetResource()
	return r != nil && r.GetKind() == "EgressNetwork"
}

// EgressOpaque reports whether an egress destination's policy makes its
// traffic opaque (an opaque port): the proxy then skips HTTP detection.
func (st *State) EgressOpaque(ctx context.Context, d *Destination) bool {
	return st.Service(ctx, d).router.Load().Opaque
}

// EgressRefusesOpaque reports whether an egress destination's policy
// forbids the opaque traffic about to be forwarded, and counts and logs
// the refusal. The policy is read as Linkerd's proxy reads it for a
// connection no TCPRoute matches: the first rule of the first opaque
// route (of the Opaque protocol, or of Detect's opaque fallback).
func (st *State) EgressRefusesOpaque(ctx context.Context, d *Destination, log *slog.Logger) bool {
	pol := st.Service(ctx, d).Policy()
	r := OpaqueRouteOf(pol)
	if len(r.GetRules()) == 0 {
		return false
	}
	for _, f := range r.GetRules()[0].GetFilters() {
		if f.GetForbidden() != nil || f.GetInvalid() != nil {
			st.s.Metrics.Refuse(connmetrics.Outbound, RefuseForbidden)
			log.Info("outbound connection refused by its outbound policy", "route", r.GetMetadata().GetDefault(), "parent", pol.GetMetadata().GetResource().GetName())
			return true
		}
	}
	return false
}

// egressParentLabels adds, to the route series of an egress destination,
// the EgressNetwork its policy came from, with the labels Linkerd's proxy
// puts on outbound route metrics (parent_group, parent_kind,
// parent_namespace, parent_name). The values come from the policy
// controller, not from requests: one set per EgressNetwork. A series keeps
// the parent it was made with if another EgressNetwork takes the address
// over while the route's series lives.
func egressParentLabels(l *metricstore.Labels, s *Service) {
	if !s.dest.Ext.egress {
		return
	}
	r := s.Policy().GetMetadata().GetResource()
	if r.GetKind() != "EgressNetwork" {
		return
	}
	l.Add("parent_group", metricstore.LabelValue(r.GetGroup())).Add("parent_kind", "EgressNetwork").
		Add("parent_namespace", metricstore.LabelValue(r.GetNamespace())).Add("parent_name", metricstore.LabelValue(r.GetName()))
}
