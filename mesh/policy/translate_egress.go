package policy

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/ports"
)

// egressNet is a translated EgressNetwork: the networks it stands for,
// its traffic policy, the outbound settings of its annotations (as a
// Service's: opaque ports, failure accrual, retries, timeouts) and the
// routes attached to it.
type egressNet struct {
	ref      ObjectRef
	obj      *v1alpha1.EgressNetwork
	deny     bool
	nets     []authz.Network
	opaque   ports.Set
	accrual  *accrualSpec
	retry    retrySpec
	timeouts timeoutSpec
	http     []*outboundRoute
	grpc     []*outboundRoute
	// tcp and tls are the TCPRoutes and TLSRoutes attached to it.
	tcp, tls []*streamAttach
}

// translateEgressNetwork checks one EgressNetwork with the rules of
// Linkerd's admission webhook, which are ours wherever the object arrives
// (webhook, files, informer): the traffic policy is Allow or Deny (the
// CRD's enum, which files do not pass through); a networks list, when
// given, is not empty; every CIDR parses and every exception lies inside
// its CIDR without covering it. An EgressNetwork that breaks one is
// ignored (SeverityError). Without networks it stands for every address
// outside the cluster networks, as in Linkerd.
func translateEgressNetwork(cfg *Config, p *problems, en *v1alpha1.EgressNetwork) (*egressNet, bool) {
	ref := ObjectRef{Kind: "EgressNetwork", Namespace: en.Namespace, Name: en.Name}
	e := &egressNet{ref: ref, obj: en}
	ok := true
	switch en.Spec.TrafficPolicy {
	case v1alpha1.TrafficPolicyAllow:
	case v1alpha1.TrafficPolicyDeny:
		e.deny = true
	default:
		p.errorf(ref, "spec.trafficPolicy", "%q is not a traffic policy (want Allow or Deny)", en.Spec.TrafficPolicy)
		ok = false
	}
	switch {
	case en.Spec.Networks == nil:
		e.nets = outsideCluster(cfg.ClusterNetworks)
	case len(en.Spec.Networks) == 0:
		p.errorf(ref, "spec.networks", "at least one network must be given (leave the field out to mean every address outside the cluster networks)")
		ok = false
	default:
		for i, nw := range en.Spec.Networks {
			n, good := parseNetworks(p, ref, fmt.Sprintf("spec.networks[%d]", i), nw.Cidr, nw.Except)
			ok = ok && good
			e.nets = append(e.nets, n)
		}
	}
	if !ok {
		return nil, false
	}
	// Linkerd reads the opaque-ports annotation of the EgressNetwork
	// itself, else the cluster's default list (not the namespace's).
	opaque, _, err := ports.OpaqueForService(en.Annotations, nil, cfg.OpaquePorts)
	if err != nil {
		p.warnf(ref, "metadata.annotations."+vocab.AnnotationOpaquePorts, "%v; no port is opaque", err)
	}
	e.opaque = opaque
	e.accrual = parseAccrual(p, ref, en.Annotations)
	if _, set := en.Annotations[vocab.AnnotationPenalizeFailures]; set {
		// As Linkerd notes: the default backend forwards without a
		// balancer, and Service backends of its routes drop the penalty.
		p.warnf(ref, "metadata.annotations."+vocab.AnnotationPenalizeFailures, "has no effect on an EgressNetwork (its traffic is forwarded, not balanced)")
	}
	e.retry = parseRetry(p, ref, en.Annotations)
	e.timeouts, _ = parseTimeouts(p, ref, en.Annotations)
	return e, true
}

// outsideCluster is what an EgressNetwork without networks stands for:
// 0.0.0.0/0 and ::/0, each minus the cluster networks of its family.
func outsideCluster(cluster []netip.Prefix) []authz.Network {
	v4 := authz.Network{Net: netip.MustParsePrefix("0.0.0.0/0")}
	v6 := authz.Network{Net: netip.MustParsePrefix("::/0")}
	for _, c := range cluster {
		if c.Addr().Is4() {
			v4.Except = append(v4.Except, c)
		} else {
			v6.Except = append(v6.Except, c)
		}
	}
	return []authz.Network{v4, v6}
}

// isEgressParent reports whether a route's parentRef names an
// EgressNetwork.
func isEgressParent(pr parentRef) bool {
	return strings.EqualFold(pr.group, policyGroup) && strings.EqualFold(pr.kind, "EgressNetwork")
}

// matchSize is the size of the smallest of e's networks that contains
// addr (its addresses minus those of its exceptions), or nil when none
// does. Linkerd counts a block's usable hosts (an IPv4 block loses its
// network and broadcast addresses); counting every address orders blocks
// the same way but for the ties that count makes (a /30 and a /31).
func (e *egressNet) matchSize(addr netip.Addr) *big.Int {
	var best *big.Int
	for _, n := range e.nets {
		if !n.Contains(addr) {
			continue
		}
		size := blockSize(n.Net)
		for _, ex := range n.Except {
			size.Sub(size, blockSize(ex))
		}
		if best == nil || size.Cmp(best) < 0 {
			best = size
		}
	}
	return best
}

func blockSize(p netip.Prefix) *big.Int {
	return new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
}

// buildEgress translates the EgressNetworks and attaches the routes whose
// parentRefs name them (routes in the EgressNetwork's own namespace, as
// for Services).
func (b *builder) buildEgress(ox *outboundIndex) {
	byName := map[nsName]*egressNet{}
	for _, en := range b.objs.EgressNetworks {
		e, ok := translateEgressNetwork(b.cfg, b.p, en)
		if !ok {
			continue
		}
		byName[nsName{en.Namespace, en.Name}] = e
		ox.egress = append(ox.egress, e)
	}
	parent := func(ref ObjectRef, ns string, pr parentRef) *egressNet {
		if pr.namespace != ns {
			b.p.warnf(ref, "spec.parentRefs", "routes for an EgressNetwork in another namespace are not supported; ignored for %s/%s", pr.namespace, pr.name)
			return nil
		}
		e := byName[nsName{pr.namespace, pr.name}]
		if e == nil {
			b.p.warnf(ref, "spec.parentRefs", "EgressNetwork %s/%s not found", pr.namespace, pr.name)
		}
		return e
	}
	for _, r := range b.httpRoutes {
		if r.unsupportedOut != "" {
			continue
		}
		for _, pr := range r.parents {
			if !isEgressParent(pr) {
				continue
			}
			if e := parent(r.ref, r.meta.Namespace, pr); e != nil {
				or := &outboundRoute{meta: r.route.Meta, created: r.route.Created, hosts: r.route.Hosts, port: pr.port, http: r.rules, noRules: r.emptyRules}
				or.retry = parseRetry(b.p, r.ref, r.meta.Annotations)
				or.timeouts, or.hasTO = parseTimeouts(b.p, r.ref, r.meta.Annotations)
				e.http = append(e.http, or)
			}
		}
	}
	for _, r := range b.grpcRoutes {
		if r.unsupported != "" {
			continue
		}
		for _, pr := range r.parents {
			if !isEgressParent(pr) {
				continue
			}
			if e := parent(r.ref, r.meta.Namespace, pr); e != nil {
				or := &outboundRoute{meta: r.route.Meta, created: r.route.Created, hosts: r.route.Hosts, port: pr.port, grpc: r.outboundRules(), grpcBack: r.backends}
				or.retry = parseRetry(b.p, r.ref, r.meta.Annotations)
				or.timeouts, or.hasTO = parseTimeouts(b.p, r.ref, r.meta.Annotations)
				e.grpc = append(e.grpc, or)
			}
		}
	}
	egress := func(k nsName) *egressNet { return byName[k] }
	b.attachStreamRoutes(b.tcpRoutes, ox, egress, false)
	b.attachStreamRoutes(b.tlsRoutes, ox, egress, true)
	for _, e := range ox.egress {
		sortOutbound(e.http)
		sortOutbound(e.grpc)
		sortStreams(e.tcp)
		sortStreams(e.tls)
	}
	for _, si := range ox.services {
		sortStreams(si.tcp)
		sortStreams(si.tls)
	}
}
