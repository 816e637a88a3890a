package policy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
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

// Defaults of outbound policies, as Linkerd sends them.
const (
	queueCapacity     = 100
	queueFailfast     = 3 * time.Second
	ewmaDefaultRTT    = 30 * time.Millisecond
	ewmaDecay         = 10 * time.Second
	retryMaxBodyBytes = 64 << 10
	retryMinBackoff   = 25 * time.Millisecond
	retryMaxBackoff   = 250 * time.Millisecond
)

// OutboundTarget is what a proxy asks outbound policy for: a Service by
// name and port, or an address.
type OutboundTarget struct {
	// Namespace, Name and Port name a Service port.
	Namespace, Name string
	Port            uint16
	// Addr is set for lookups by address that match no Service; the
	// policy is then an EgressNetwork's, or the fallback that forwards to
	// the address as it is.
	Addr netip.AddrPort
	// SourceNamespace is the asking workload's namespace: Addr lookups
	// look for EgressNetworks there first, and a Service's consumer
	// routes in that namespace apply (only) to it. It is the proxy's
	// claim (the context token), trusted as Linkerd trusts it: a workload
	// that names another namespace only changes which routes it is
	// itself given, never anyone else's policy or what a server allows.
	SourceNamespace string
}

// key is the fan-out key of the target. A Service target's key names the
// client's namespace last (it is the proxy's claim and may hold any
// byte); outboundTopic folds it away where it makes no difference.
func (t OutboundTarget) key() string {
	if t.Addr.IsValid() {
		return "addr\x00" + t.SourceNamespace + "\x00" + t.Addr.String()
	}
	return fmt.Sprintf("svc\x00%s\x00%s\x00%d\x00%s", t.Namespace, t.Name, t.Port, t.SourceNamespace)
}

func parseOutboundKey(key string) OutboundTarget {
	if rest, ok := strings.CutPrefix(key, "addr\x00"); ok {
		// The address is last: the namespace, which the proxy names,
		// may hold any byte.
		i := strings.LastIndexByte(rest, 0)
		ap, _ := netip.ParseAddrPort(rest[i+1:])
		return OutboundTarget{Addr: ap, SourceNamespace: rest[:i]}
	}
	parts := strings.SplitN(key, "\x00", 5)
	port, _ := strconv.Atoi(parts[3])
	return OutboundTarget{Namespace: parts[1], Name: parts[2], Port: uint16(port), SourceNamespace: parts[4]}
}

// outboundTopic is the fan-out topic of key in ix: a Service target's
// key without the client's namespace unless that namespace has consumer
// routes for the Service port, so that every client without consumer
// routes shares one computed policy per Service port.
func outboundTopic(ix *Index, key string) string {
	if ix == nil || !strings.HasPrefix(key, "svc\x00") {
		return key
	}
	// The client's namespace follows the fourth NUL (the Service's
	// namespace, name and port hold none).
	cut := 0
	for range 4 {
		i := strings.IndexByte(key[cut:], 0)
		if i < 0 {
			return key
		}
		cut += i + 1
	}
	if cut == len(key) {
		return key
	}
	if ix.outbound != nil && ix.outbound.consumers > 0 {
		t := parseOutboundKey(key)
		if ix.hasConsumerRoutes(t.Namespace, t.Name, t.Port, t.SourceNamespace) {
			return key
		}
	}
	return key[:cut]
}

// hasConsumerRoutes says whether namespace client has routes of its own
// for port of Service ns/name.
func (ix *Index) hasConsumerRoutes(ns, name string, port uint16, client string) bool {
	if ix.outbound == nil {
		return false
	}
	si, ok := ix.outbound.services[nsName{ns, name}]
	if !ok || si.consumers[client] == nil {
		return false
	}
	return si.consumers[client].appliesTo(port)
}

// ResolveAuthority maps "<name>.<namespace>.svc.<cluster-domain>[:port]"
// (port 80 when absent) to a Service target.
func (ix *Index) ResolveAuthority(authority string) (OutboundTarget, error) {
	host, portStr := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.Contains(authority[i+1:], "]") {
		host, portStr = authority[:i], authority[i+1:]
	}
	port := 80
	if portStr != "" {
		n, err := strconv.Atoi(portStr)
		if err != nil || n < 1 || n > 65535 {
			return OutboundTarget{}, fmt.Errorf("%w: authority %q: invalid port", ErrInvalid, authority)
		}
		port = n
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	host = strings.TrimSuffix(host, "."+ix.cfg.ClusterDomain)
	parts := strings.Split(host, ".")
	if len(parts) != 3 || parts[2] != "svc" || parts[0] == "" || parts[1] == "" {
		return OutboundTarget{}, fmt.Errorf("%w: authority %q is not <name>.<namespace>.svc.%s", ErrNotFound, authority, ix.cfg.ClusterDomain)
	}
	if _, ok := ix.outbound.services[nsName{parts[1], parts[0]}]; !ok {
		return OutboundTarget{}, fmt.Errorf("%w: Service %s/%s", ErrNotFound, parts[1], parts[0])
	}
	return OutboundTarget{Namespace: parts[1], Name: parts[0], Port: uint16(port)}, nil
}

// ResolveAddr maps an address to the Service whose cluster IP it is, or to
// an address target for anything else (pods, hosts outside the cluster).
func (ix *Index) ResolveAddr(ap netip.AddrPort) OutboundTarget {
	if si, ok := ix.outbound.byIP[ap.Addr().Unmap()]; ok {
		return OutboundTarget{Namespace: si.svc.Namespace, Name: si.svc.Name, Port: ap.Port()}
	}
	return OutboundTarget{Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

func defaultQueue() *outbound.Queue {
	return &outbound.Queue{Capacity: queueCapacity, FailfastTimeout: dur(queueFailfast)}
}

func serviceMeta(ns, name string, port uint16) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "core", Kind: "Service", Namespace: ns, Name: name, Port: uint32(port)}}}
}

func defaultMeta(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}}
}

// serviceBackend balances over a Service port's endpoints; load sets the
// estimator (balancerLoad).
func (ix *Index) serviceBackend(ns, name string, port uint16, load func(*outbound.Backend_BalanceP2C)) *outbound.Backend {
	p2c := &outbound.Backend_BalanceP2C{
		Discovery: &outbound.Backend_EndpointDiscovery{Kind: &outbound.Backend_EndpointDiscovery_Dst{
			Dst: &outbound.Backend_EndpointDiscovery_DestinationGet{Path: fmt.Sprintf("%s.%s.svc.%s:%d", name, ns, ix.cfg.ClusterDomain, port)},
		}},
	}
	load(p2c)
	return &outbound.Backend{
		Metadata: serviceMeta(ns, name, port),
		Queue:    defaultQueue(),
		Kind:     &outbound.Backend_Balancer{Balancer: p2c},
	}
}

// OutboundPolicy computes the policy of a target, as the Outbound API
// serves it.
func (ix *Index) OutboundPolicy(t OutboundTarget) (*outbound.OutboundPolicy, error) {
	if t.Addr.IsValid() {
		return ix.addrPolicy(t), nil
	}
	si, ok := ix.outbound.services[nsName{t.Namespace, t.Name}]
	if !ok {
		return nil, fmt.Errorf("%w: Service %s/%s", ErrNotFound, t.Namespace, t.Name)
	}
	si = si.forClient(t.SourceNamespace)
	var sp *corev1.ServicePort
	for i := range si.svc.Spec.Ports {
		if si.svc.Spec.Ports[i].Port == int32(t.Port) {
			sp = &si.svc.Spec.Ports[i]
		}
	}
	md := serviceMeta(t.Namespace, t.Name, t.Port)
	if sp == nil {
		return undefinedPortPolicy(md), nil
	}
	appProto := ""
	if sp.AppProtocol != nil {
		appProto = strings.ToLower(*sp.AppProtocol)
	}
	// appProtocol wins over the opaque-ports list (Linkerd's rule).
	isOpaque := appProto == "linkerd.io/opaque" || (appProto != "" && !knownAppProtocol(appProto)) || (appProto == "" && si.opaque.Contains(uint32(t.Port)))
	// The Service's own balancer drops the failure penalty on opaque
	// ports (no response to penalise); its routes' backends share the
	// Service's estimator.
	backend := ix.serviceBackend(t.Namespace, t.Name, t.Port, balancerLoad(si.bias, isOpaque))
	opaqueRoute := &outbound.OpaqueRoute{
		Metadata: defaultMeta("opaq"),
		Rules: []*outbound.OpaqueRoute_Rule{{Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.OpaqueRoute_Distribution_FirstAvailable{Backends: []*outbound.OpaqueRoute_RouteBackend{{Backend: backend}}},
		}}}},
	}
	opaque := &outbound.ProxyProtocol_Opaque{Routes: []*outbound.OpaqueRoute{opaqueRoute}}
	accrual := si.accrual.proto()
	routesFor := func(rs []*outboundRoute) []*outboundRoute {
		var out []*outboundRoute
		for _, r := range rs {
			if r.port == 0 || r.port == int32(t.Port) {
				out = append(out, r)
			}
		}
		return out
	}
	attachedHTTP := routesFor(si.http)
	httpRoutes := ix.outboundHTTPRoutes(si, attachedHTTP, backend)
	grpcRoutes := routesFor(si.grpc)
	// TCPRoutes and TLSRoutes (outbound_streamroute.go) count where
	// Linkerd's controller lets them: an opaque port's TCPRoutes, and on a
	// port without appProtocol, TLSRoutes then TCPRoutes when no HTTP or
	// gRPC route is attached.
	tcpRoutes, tlsRoutes := streamsFor(si.tcp, t.Port), streamsFor(si.tls, t.Port)
	if isOpaque && len(tcpRoutes) > 0 {
		opaque = ix.tcpProtocol(si, tcpRoutes, backend)
	}
	streams := appProto == "" && !isOpaque && len(attachedHTTP) == 0 && len(grpcRoutes) == 0

	pp := &outbound.ProxyProtocol{}
	switch {
	case isOpaque:
		pp.Kind = &outbound.ProxyProtocol_Opaque_{Opaque: opaque}
	case appProto == "http":
		pp.Kind = &outbound.ProxyProtocol_Http1_{Http1: &outbound.ProxyProtocol_Http1{Routes: httpRoutes, FailureAccrual: accrual}}
	case appProto == "linkerd.io/grpc" || (len(grpcRoutes) > 0 && (appProto == "" || isH2(appProto))):
		pp.Kind = &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{Routes: ix.outboundGRPCRoutes(si, grpcRoutes, backend), FailureAccrual: accrual}}
	case isH2(appProto):
		pp.Kind = &outbound.ProxyProtocol_Http2_{Http2: &outbound.ProxyProtocol_Http2{Routes: httpRoutes, FailureAccrual: accrual}}
	case streams && len(tlsRoutes) > 0:
		pp.Kind = &outbound.ProxyProtocol_Tls_{Tls: ix.tlsProtocol(si, tlsRoutes, backend)}
	case streams && len(tcpRoutes) > 0:
		pp.Kind = &outbound.ProxyProtocol_Opaque_{Opaque: ix.tcpProtocol(si, tcpRoutes, backend)}
	default:
		pp.Kind = &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
			Timeout: dur(ix.cfg.DetectTimeout),
			Opaque:  opaque,
			Http1:   &outbound.ProxyProtocol_Http1{Routes: httpRoutes, FailureAccrual: accrual},
			Http2:   &outbound.ProxyProtocol_Http2{Routes: httpRoutes, FailureAccrual: accrual},
		}}
	}
	return &outbound.OutboundPolicy{Metadata: md, Protocol: pp}, nil
}

func isH2(p string) bool { return p == "kubernetes.io/h2c" || p == "linkerd.io/h2c" }

func knownAppProtocol(p string) bool {
	switch p {
	case "http", "https", "kubernetes.io/h2c", "kubernetes.io/ws", "kubernetes.io/wss", "linkerd.io/h2c", "linkerd.io/grpc", "linkerd.io/opaque":
		return true
	}
	return false
}

func (r *outboundRoute) effective(si *serviceInfo) (retrySpec, timeoutSpec) {
	retry := r.retry
	if !retry.set {
		retry = si.retry
	}
	t := si.timeouts
	if r.hasTO[0] {
		t.request = r.timeouts.request
	}
	if r.hasTO[1] {
		t.response = r.timeouts.response
	}
	if r.hasTO[2] {
		t.idle = r.timeouts.idle
	}
	return retry, t
}

func timeoutsProto(t timeoutSpec) *httproute.Timeouts {
	out := &httproute.Timeouts{}
	if t.request > 0 {
		out.Request = dur(t.request)
	}
	if t.response > 0 {
		out.Response = dur(t.response)
	}
	if t.idle > 0 {
		out.Idle = dur(t.idle)
	}
	return out
}

func (ix *Index) backendFor(ns string, br gatewayv1.BackendRef, load func(*outbound.Backend_BalanceP2C)) (*outbound.Backend, uint32, string) {
	weight := uint32(1)
	if br.Weight != nil {
		if *br.Weight < 0 {
			return nil, 0, "negative weight"
		}
		weight = uint32(*br.Weight)
	}
	group, kind := "", "Service"
	if br.Group != nil {
		group = string(*br.Group)
	}
	if br.Kind != nil {
		kind = string(*br.Kind)
	}
	if !isCoreGroup(group) || kind != "Service" {
		return nil, weight, fmt.Sprintf("unsupported backend %s", groupKind(group, kind))
	}
	bns := ns
	if br.Namespace != nil && *br.Namespace != "" {
		bns = string(*br.Namespace)
	}
	if br.Port == nil {
		return nil, weight, fmt.Sprintf("backend Service %s has no port", br.Name)
	}
	if _, ok := ix.outbound.services[nsName{bns, string(br.Name)}]; !ok {
		return nil, weight, fmt.Sprintf("Service not found %s", br.Name)
	}
	return ix.serviceBackend(bns, string(br.Name), uint16(*br.Port), load), weight, ""
}

func invalidHTTPBackend(weight uint32, msg string) *outbound.HttpRoute_WeightedRouteBackend {
	return &outbound.HttpRoute_WeightedRouteBackend{Weight: weight, Backend: &outbound.HttpRoute_RouteBackend{
		Backend: &outbound.Backend{Metadata: defaultMeta("invalid"), Queue: defaultQueue()},
		Filters: []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{Status: 500, Message: msg}}}},
	}}
}

func (ix *Index) outboundHTTPRoutes(si *serviceInfo, rs []*outboundRoute, backend *outbound.Backend) []*outbound.HttpRoute {
	var out []*outbound.HttpRoute
	for _, r := range rs {
		retry, timeouts := r.effective(si)
		pr := &outbound.HttpRoute{Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: r.meta.Group, Kind: r.meta.Kind, Namespace: r.meta.Namespace, Name: r.meta.Name}}},
			Hosts: authz.HostsToProto(r.hosts)}
		rules := r.http
		if len(rules) == 0 && !r.noRules {
			rules = []routeRule{{}}
		}
		for _, rule := range rules {
			prr := &outbound.HttpRoute_Rule{Timeouts: timeoutsProto(timeouts)}
			for _, m := range rule.matches {
				prr.Matches = append(prr.Matches, authz.HTTPMatchToProto(m))
			}
			if len(prr.Matches) == 0 {
				prr.Matches = []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}}
			}
			if rule.timeouts != nil && rule.timeouts.Request != nil && !r.hasTO[0] && si.timeouts.request == 0 {
				if d, err := time.ParseDuration(string(*rule.timeouts.Request)); err == nil && d > 0 {
					prr.Timeouts.Request = dur(d)
				}
			}
			if len(rule.backends) == 0 {
				prr.Backends = &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
					FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: backend}}}}}
			} else {
				var wbs []*outbound.HttpRoute_WeightedRouteBackend
				for _, br := range rule.backends {
					b, w, invalid := ix.routeBackendFor(si, r.meta.Namespace, br.BackendRef, balancerLoad(si.bias, false))
					if invalid != "" {
						wbs = append(wbs, invalidHTTPBackend(w, invalid))
						continue
					}
					wbs = append(wbs, &outbound.HttpRoute_WeightedRouteBackend{Weight: w, Backend: &outbound.HttpRoute_RouteBackend{Backend: b}})
				}
				prr.Backends = &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_RandomAvailable_{
					RandomAvailable: &outbound.HttpRoute_Distribution_RandomAvailable{Backends: wbs}}}
			}
			if retry.set {
				rp := &outbound.HttpRoute_Retry{MaxRetries: retry.limit, MaxRequestBytes: retryMaxBodyBytes,
					Backoff: &outbound.ExponentialBackoff{MinBackoff: dur(retryMinBackoff), MaxBackoff: dur(retryMaxBackoff), JitterRatio: 1}}
				if retry.timeout > 0 {
					rp.Timeout = dur(retry.timeout)
				}
				if len(retry.conditions) > 0 {
					rp.Conditions = &outbound.HttpRoute_Retry_Conditions{}
					for _, c := range retry.conditions {
						rp.Conditions.StatusRanges = append(rp.Conditions.StatusRanges, &outbound.HttpRoute_Retry_Conditions_StatusRange{Start: c.start, End: c.end})
					}
				}
				prr.Retry = rp
			}
			pr.Rules = append(pr.Rules, prr)
		}
		out = append(out, pr)
	}
	if len(out) == 0 {
		retry, timeouts := (&outboundRoute{}).effective(si)
		rule := &outbound.HttpRoute_Rule{
			Matches:  []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}},
			Timeouts: timeoutsProto(timeouts),
			Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
				FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: backend}}}}},
		}
		if retry.set {
			rule.Retry = &outbound.HttpRoute_Retry{MaxRetries: retry.limit, MaxRequestBytes: retryMaxBodyBytes,
				Backoff: &outbound.ExponentialBackoff{MinBackoff: dur(retryMinBackoff), MaxBackoff: dur(retryMaxBackoff), JitterRatio: 1}}
			if retry.timeout > 0 {
				rule.Retry.Timeout = dur(retry.timeout)
			}
			for _, c := range retry.conditions {
				if rule.Retry.Conditions == nil {
					rule.Retry.Conditions = &outbound.HttpRoute_Retry_Conditions{}
				}
				rule.Retry.Conditions.StatusRanges = append(rule.Retry.Conditions.StatusRanges, &outbound.HttpRoute_Retry_Conditions_StatusRange{Start: c.start, End: c.end})
			}
		}
		out = append(out, &outbound.HttpRoute{Metadata: defaultMeta("http"), Rules: []*outbound.HttpRoute_Rule{rule}})
	}
	return out
}

func (ix *Index) outboundGRPCRoutes(si *serviceInfo, rs []*outboundRoute, backend *outbound.Backend) []*outbound.GrpcRoute {
	var out []*outbound.GrpcRoute
	retryProto := func(retry retrySpec) *outbound.GrpcRoute_Retry {
		if !retry.set {
			return nil
		}
		rp := &outbound.GrpcRoute_Retry{MaxRetries: retry.limit, MaxRequestBytes: retryMaxBodyBytes,
			Backoff: &outbound.ExponentialBackoff{MinBackoff: dur(retryMinBackoff), MaxBackoff: dur(retryMaxBackoff), JitterRatio: 1}}
		if retry.timeout > 0 {
			rp.Timeout = dur(retry.timeout)
		}
		if len(retry.grpcCodes) > 0 {
			c := &outbound.GrpcRoute_Retry_Conditions{}
			for _, code := range retry.grpcCodes {
				switch code {
				case "cancelled":
					c.Cancelled = true
				case "deadline-exceeded":
					c.DeadineExceeded = true
				case "resource-exhausted":
					c.ResourceExhausted = true
				case "internal":
					c.Internal = true
				case "unavailable":
					c.Unavailable = true
				}
			}
			rp.Conditions = c
		}
		return rp
	}
	first := func() *outbound.GrpcRoute_Distribution {
		return &outbound.GrpcRoute_Distribution{Kind: &outbound.GrpcRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.GrpcRoute_Distribution_FirstAvailable{Backends: []*outbound.GrpcRoute_RouteBackend{{Backend: backend}}}}}
	}
	for _, r := range rs {
		retry, timeouts := r.effective(si)
		pr := &outbound.GrpcRoute{Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
			Group: r.meta.Group, Kind: r.meta.Kind, Namespace: r.meta.Namespace, Name: r.meta.Name}}},
			Hosts: authz.HostsToProto(r.hosts)}
		for i, rule := range r.grpc {
			prr := &outbound.GrpcRoute_Rule{Timeouts: timeoutsProto(timeouts), Retry: retryProto(retry)}
			for _, m := range rule.Matches {
				prr.Matches = append(prr.Matches, authz.GRPCMatchToProto(m))
			}
			var brs []gatewayv1.BackendRef
			if i < len(r.grpcBack) {
				brs = r.grpcBack[i]
			}
			if len(brs) == 0 {
				prr.Backends = first()
			} else {
				var wbs []*outbound.GrpcRoute_WeightedRouteBackend
				for _, br := range brs {
					b, w, invalid := ix.routeBackendFor(si, r.meta.Namespace, br, balancerLoad(si.bias, false))
					if invalid != "" {
						b = &outbound.Backend{Metadata: defaultMeta("invalid"), Queue: defaultQueue()}
						wbs = append(wbs, &outbound.GrpcRoute_WeightedRouteBackend{Weight: w, Backend: &outbound.GrpcRoute_RouteBackend{Backend: b,
							Filters: []*outbound.GrpcRoute_Filter{{Kind: &outbound.GrpcRoute_Filter_FailureInjector{FailureInjector: &grpcroute.GrpcFailureInjector{Code: 13, Message: invalid}}}}}})
						continue
					}
					wbs = append(wbs, &outbound.GrpcRoute_WeightedRouteBackend{Weight: w, Backend: &outbound.GrpcRoute_RouteBackend{Backend: b}})
				}
				prr.Backends = &outbound.GrpcRoute_Distribution{Kind: &outbound.GrpcRoute_Distribution_RandomAvailable_{
					RandomAvailable: &outbound.GrpcRoute_Distribution_RandomAvailable{Backends: wbs}}}
			}
			pr.Rules = append(pr.Rules, prr)
		}
		out = append(out, pr)
	}
	return out
}

func undefinedPortPolicy(md *meta.Metadata) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Metadata: md, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Opaque_{Opaque: &outbound.ProxyProtocol_Opaque{
		Routes: []*outbound.OpaqueRoute{{
			Metadata: defaultMeta("undefined-port"),
			Rules: []*outbound.OpaqueRoute_Rule{{
				Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_Empty_{Empty: &outbound.OpaqueRoute_Distribution_Empty{}}},
				Filters:  []*outbound.OpaqueRoute_Filter{{Kind: &outbound.OpaqueRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}},
			}},
		}},
	}}}}
}

func fallbackPolicy(addr netip.AddrPort, detect time.Duration) *outbound.OutboundPolicy {
	md := defaultMeta("egress-fallback")
	backend := &outbound.Backend{Metadata: md, Queue: defaultQueue(), Kind: &outbound.Backend_Forward{Forward: &destination.WeightedAddr{
		Addr: &pnet.TcpAddress{Ip: authz.AddrToProto(addr.Addr()), Port: uint32(addr.Port())}, Weight: 1,
	}}}
	httpRoutes := []*outbound.HttpRoute{{Metadata: md, Rules: []*outbound.HttpRoute_Rule{{
		Matches: []*httproute.HttpRouteMatch{{}},
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: backend}}}}},
	}}}}
	return &outbound.OutboundPolicy{Metadata: md, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: dur(detect),
		Opaque: &outbound.ProxyProtocol_Opaque{Routes: []*outbound.OpaqueRoute{{Metadata: md, Rules: []*outbound.OpaqueRoute_Rule{{
			Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_FirstAvailable_{
				FirstAvailable: &outbound.OpaqueRoute_Distribution_FirstAvailable{Backends: []*outbound.OpaqueRoute_RouteBackend{{Backend: backend}}}}},
		}}}}},
		Http1: &outbound.ProxyProtocol_Http1{Routes: httpRoutes},
		Http2: &outbound.ProxyProtocol_Http2{Routes: httpRoutes},
	}}}}
}

// OutboundServer serves io.linkerd.proxy.outbound.OutboundPolicies from an
// Indexer. Watches of the same target share one computed policy.
type OutboundServer struct {
	outbound.UnimplementedOutboundPoliciesServer
	x     *Indexer
	hub   *fanout[*outbound.OutboundPolicy]
	drain drainer
}

// NewOutboundServer returns a server reading from x.
func NewOutboundServer(x *Indexer) (*OutboundServer, error) {
	if x == nil {
		return nil, errors.New("policy: nil indexer")
	}
	s := &OutboundServer{x: x, drain: newDrainer()}
	s.hub = newFanout(func(ix *Index, key string) (*outbound.OutboundPolicy, error) {
		return ix.OutboundPolicy(parseOutboundKey(key))
	}, func(a, b *outbound.OutboundPolicy) bool { return proto.Equal(a, b) }).withCanon(outboundTopic)
	x.listen(s.hub.update)
	return s, nil
}

// Register adds the service to r.
func (s *OutboundServer) Register(r grpc.ServiceRegistrar) {
	outbound.RegisterOutboundPoliciesServer(r, s)
}

// Drain ends every open watch stream cleanly; see InboundServer.Drain.
func (s *OutboundServer) Drain() { s.drain.drain() }

func (s *OutboundServer) target(spec *outbound.TrafficSpec) (OutboundTarget, error) {
	var source WorkloadRef
	if w := spec.GetSourceWorkload(); w != "" {
		var err error
		if source, err = ParseProxyWorkload(w); err != nil {
			return OutboundTarget{}, err
		}
	}
	ix := s.x.Index()
	switch t := spec.GetTarget().(type) {
	case *outbound.TrafficSpec_Authority:
		ot, err := ix.ResolveAuthority(t.Authority)
		ot.SourceNamespace = source.Namespace
		return ot, err
	case *outbound.TrafficSpec_Addr:
		a, err := authz.AddrFromProto(t.Addr.GetIp())
		if err != nil {
			return OutboundTarget{}, fmt.Errorf("%w: target address: %v", ErrInvalid, err)
		}
		port := t.Addr.GetPort()
		if port == 0 || port > 65535 {
			return OutboundTarget{}, fmt.Errorf("%w: port %d is out of range 1-65535", ErrInvalid, port)
		}
		ot := ix.ResolveAddr(netip.AddrPortFrom(a, uint16(port)))
		ot.SourceNamespace = source.Namespace
		return ot, nil
	}
	return OutboundTarget{}, fmt.Errorf("%w: target is required", ErrInvalid)
}

// Get returns the current policy of a target.
func (s *OutboundServer) Get(ctx context.Context, spec *outbound.TrafficSpec) (*outbound.OutboundPolicy, error) {
	t, err := s.target(spec)
	if err != nil {
		return nil, grpcError(err)
	}
	p, err := s.x.Index().OutboundPolicy(t)
	if err != nil {
		return nil, grpcError(err)
	}
	return p, nil
}

// Watch streams the policy of a target: the current one at once, then
// each change (a slow reader gets the latest).
func (s *OutboundServer) Watch(spec *outbound.TrafficSpec, stream grpc.ServerStreamingServer[outbound.OutboundPolicy]) error {
	t, err := s.target(spec)
	if err != nil {
		return grpcError(err)
	}
	sub := s.hub.subscribe(t.key())
	defer sub.close()
	s.x.cfg.Metrics.Streams.Add(1)
	defer s.x.cfg.Metrics.Streams.Add(-1)
	return serveWatch(stream.Context(), s.drain.ch, sub, func(v *outbound.OutboundPolicy) error { return stream.Send(v) })
}
