package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/ports"
)

type statusRange struct{ start, end uint32 }

type retrySpec struct {
	set        bool
	limit      uint32
	timeout    time.Duration
	conditions []statusRange // HTTP
	grpcCodes  []string      // gRPC
}

type timeoutSpec struct {
	request, response, idle time.Duration
}

type outboundRoute struct {
	meta     authz.Meta
	created  time.Time
	hosts    []authz.HostMatch
	port     int32 // parentRef port, 0 for every port
	http     []routeRule
	noRules  bool // an HTTPRoute that lists no rules (httpRouteSpec.emptyRules)
	grpc     []authz.GRPCRule
	grpcBack [][]gatewayv1.BackendRef
	retry    retrySpec
	timeouts timeoutSpec
	hasTO    [3]bool // which of request, response, idle the route sets
}

type serviceInfo struct {
	svc      *corev1.Service
	opaque   ports.Set
	accrual  *accrualSpec
	bias     *biasSpec
	retry    retrySpec
	timeouts timeoutSpec
	http     []*outboundRoute
	grpc     []*outboundRoute
	// tcp and tls are the TCPRoutes and TLSRoutes attached to the Service
	// (translate_streamroute.go).
	tcp, tls []*streamAttach
	// egress is set when the parent is an EgressNetwork (mesh/dataplane/internal/meshstate, egress.go).
	egress *egressParent
	// consumers are the consumer routes of the Service by the namespace
	// they are in: only clients in that namespace get them. The routes
	// above are its producer routes (in the Service's namespace), which
	// every client gets.
	consumers map[string]*consumerRoutes
}

// consumerRoutes are the routes of one namespace whose parent is a
// Service in another namespace (Gateway API's consumer routes).
type consumerRoutes struct {
	http, grpc []*outboundRoute
	tcp, tls   []*streamAttach
}

// appliesTo says whether any of the routes applies to port.
func (c *consumerRoutes) appliesTo(port uint16) bool {
	for _, rs := range [][]*outboundRoute{c.http, c.grpc} {
		for _, r := range rs {
			if r.port == 0 || r.port == int32(port) {
				return true
			}
		}
	}
	return len(streamsFor(c.tcp, port)) > 0 || len(streamsFor(c.tls, port)) > 0
}

// consumer returns the consumer routes of namespace ns for si, adding
// them.
func (ox *outboundIndex) consumer(si *serviceInfo, ns string) *consumerRoutes {
	if si.consumers == nil {
		si.consumers = map[string]*consumerRoutes{}
	}
	c := si.consumers[ns]
	if c == nil {
		c = &consumerRoutes{}
		si.consumers[ns] = c
		ox.consumers++
	}
	return c
}

// forClient is the Service as a client in namespace ns sees it: its
// producer routes and, when ns has consumer routes for it, those too,
// in one list per kind ordered as Linkerd's controller orders the routes
// it serves (oldest first, then by name). Linkerd merges the two sets in
// the same way: a consumer route does not hide the producer routes.
func (si *serviceInfo) forClient(ns string) *serviceInfo {
	c := si.consumers[ns]
	if c == nil {
		return si
	}
	view := *si
	view.http = append(append([]*outboundRoute(nil), si.http...), c.http...)
	view.grpc = append(append([]*outboundRoute(nil), si.grpc...), c.grpc...)
	view.tcp = append(append([]*streamAttach(nil), si.tcp...), c.tcp...)
	view.tls = append(append([]*streamAttach(nil), si.tls...), c.tls...)
	sortOutbound(view.http)
	sortOutbound(view.grpc)
	sortStreams(view.tcp)
	sortStreams(view.tls)
	return &view
}

type outboundIndex struct {
	cfg      *Config
	services map[nsName]*serviceInfo
	byIP     map[netip.Addr]*serviceInfo
	egress   []*egressNet // translate_egress.go
	// consumers counts the (Service, namespace) pairs with consumer
	// routes; none is the common case, which needs no lookup per watch.
	consumers int
}

// parseLinkerdDuration reads Linkerd's duration format: digits and a unit
// of ms, s, m, h or d ("500ms", "2m"); "0" alone is allowed.
func parseLinkerdDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q does not start with a number", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %v", s, err)
	}
	var unit time.Duration
	switch s[i:] {
	case "":
		if n != 0 {
			return 0, fmt.Errorf("%q has no unit (ms, s, m, h or d)", s)
		}
		return 0, nil
	case "ms":
		unit = time.Millisecond
	case "s":
		unit = time.Second
	case "m":
		unit = time.Minute
	case "h":
		unit = time.Hour
	case "d":
		unit = 24 * time.Hour
	default:
		return 0, fmt.Errorf("%q: unknown unit %q (ms, s, m, h or d)", s, s[i:])
	}
	if n > int64((1<<63-1)/unit) {
		return 0, fmt.Errorf("%q is too long", s)
	}
	return time.Duration(n) * unit, nil
}

var grpcRetryCodes = map[string]bool{"cancelled": true, "deadline-exceeded": true, "resource-exhausted": true, "internal": true, "unavailable": true}

func parseRetry(p *problems, ref ObjectRef, a map[string]string) retrySpec {
	var r retrySpec
	field := func(k string) string { return "metadata.annotations." + k }
	if v, ok := a[vocab.AnnotationRetryLimit]; ok {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
		if err != nil {
			p.warnf(ref, field(vocab.AnnotationRetryLimit), "%q is not a number; ignored", v)
		} else if n > 0 {
			r.set, r.limit = true, uint32(n)
		}
	}
	if v, ok := a[vocab.AnnotationRetryTimeout]; ok {
		d, err := parseLinkerdDuration(v)
		if err != nil {
			p.warnf(ref, field(vocab.AnnotationRetryTimeout), "%v; ignored", err)
		} else if d > 0 {
			r.set, r.timeout = true, d
		}
	}
	if v, ok := a[vocab.AnnotationRetryHTTP]; ok {
		conds, err := parseStatusRanges(v)
		if err != nil {
			p.warnf(ref, field(vocab.AnnotationRetryHTTP), "%v; the annotation is ignored", err)
		} else {
			r.set, r.conditions = true, conds
		}
	}
	if v, ok := a[vocab.AnnotationRetryGRPC]; ok {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if !grpcRetryCodes[c] {
				p.warnf(ref, field(vocab.AnnotationRetryGRPC), "unsupported gRPC retry condition %q (want cancelled, deadline-exceeded, resource-exhausted, internal or unavailable)", c)
				continue
			}
			r.grpcCodes = append(r.grpcCodes, c)
		}
		r.set = true
	}
	if r.set && r.limit == 0 {
		r.limit = 1
	}
	return r
}

// parseStatusRanges reads "5xx", "gateway-error", "503" and "500-504",
// comma-separated.
func parseStatusRanges(v string) ([]statusRange, error) {
	var out []statusRange
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		switch {
		case strings.EqualFold(c, "5xx"):
			out = append(out, statusRange{500, 599})
		case strings.EqualFold(c, "gateway-error"):
			out = append(out, statusRange{502, 504})
		default:
			lo, hi, isRange := strings.Cut(c, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil || a < 100 || b > 599 || a > b {
				return nil, fmt.Errorf("invalid retry condition %q", c)
			}
			out = append(out, statusRange{uint32(a), uint32(b)})
		}
	}
	return out, nil
}

func parseTimeouts(p *problems, ref ObjectRef, a map[string]string) (timeoutSpec, [3]bool) {
	var t timeoutSpec
	var has [3]bool
	for i, k := range []string{vocab.AnnotationTimeoutRequest, vocab.AnnotationTimeoutResp, vocab.AnnotationTimeoutIdle} {
		v, ok := a[k]
		if !ok {
			continue
		}
		d, err := parseLinkerdDuration(v)
		if err != nil {
			p.warnf(ref, "metadata.annotations."+k, "%v; ignored", err)
			continue
		}
		has[i] = true
		switch i {
		case 0:
			t.request = d
		case 1:
			t.response = d
		case 2:
			t.idle = d
		}
	}
	return t, has
}

func isServiceParent(pr parentRef) bool {
	return isCoreGroup(pr.group) && strings.EqualFold(pr.kind, "Service")
}

func (b *builder) buildOutbound() *outboundIndex {
	ox := &outboundIndex{cfg: b.cfg, services: map[nsName]*serviceInfo{}, byIP: map[netip.Addr]*serviceInfo{}}
	b.tcpRoutes, b.tlsRoutes = b.translateStreamRoutes()
	for _, svc := range b.objs.Services {
		ref := ObjectRef{Kind: "Service", Namespace: svc.Namespace, Name: svc.Name}
		si := &serviceInfo{svc: svc}
		var nsAnn map[string]string
		if ns := b.namespaces[svc.Namespace]; ns != nil {
			nsAnn = ns.Annotations
		}
		// One rule with the destination controller (mesh/ports): the
		// annotation, else the namespace's, else the default list.
		opaque, from, err := ports.OpaqueForService(svc.Annotations, nsAnn, b.cfg.OpaquePorts)
		if err != nil {
			owner := ref
			if from == ports.FromNamespace {
				owner = ObjectRef{Kind: "Namespace", Name: svc.Namespace}
			}
			b.p.warnf(owner, "metadata.annotations."+vocab.AnnotationOpaquePorts, "%v; no port is opaque", err)
		}
		si.opaque = opaque
		si.accrual = parseAccrual(b.p, ref, svc.Annotations)
		si.bias = parseLoadBias(b.p, ref, svc.Annotations)
		si.retry = parseRetry(b.p, ref, svc.Annotations)
		si.timeouts, _ = parseTimeouts(b.p, ref, svc.Annotations)
		ox.services[nsName{svc.Namespace, svc.Name}] = si
		for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
			if a, err := netip.ParseAddr(ip); err == nil {
				ox.byIP[a.Unmap()] = si
			}
		}
	}
	for _, r := range b.httpRoutes {
		if r.unsupportedOut != "" {
			continue
		}
		for _, pr := range r.parents {
			if !isServiceParent(pr) {
				continue
			}
			si, ok := ox.services[nsName{pr.namespace, pr.name}]
			if !ok {
				b.p.warnf(r.ref, "spec.parentRefs", "Service %s/%s not found", pr.namespace, pr.name)
				continue
			}
			or := &outboundRoute{meta: r.route.Meta, created: r.route.Created, hosts: r.route.Hosts, port: pr.port, http: r.rules, noRules: r.emptyRules}
			or.retry = parseRetry(b.p, r.ref, r.meta.Annotations)
			or.timeouts, or.hasTO = parseTimeouts(b.p, r.ref, r.meta.Annotations)
			if pr.namespace != r.meta.Namespace {
				c := ox.consumer(si, r.meta.Namespace)
				c.http = append(c.http, or)
				continue
			}
			si.http = append(si.http, or)
		}
	}
	for _, r := range b.grpcRoutes {
		if r.unsupported != "" {
			continue
		}
		for _, pr := range r.parents {
			if !isServiceParent(pr) {
				continue
			}
			si, ok := ox.services[nsName{pr.namespace, pr.name}]
			if !ok {
				b.p.warnf(r.ref, "spec.parentRefs", "Service %s/%s not found", pr.namespace, pr.name)
				continue
			}
			or := &outboundRoute{meta: r.route.Meta, created: r.route.Created, hosts: r.route.Hosts, port: pr.port, grpc: r.outboundRules(), grpcBack: r.backends}
			or.retry = parseRetry(b.p, r.ref, r.meta.Annotations)
			or.timeouts, or.hasTO = parseTimeouts(b.p, r.ref, r.meta.Annotations)
			if pr.namespace != r.meta.Namespace {
				c := ox.consumer(si, r.meta.Namespace)
				c.grpc = append(c.grpc, or)
				continue
			}
			si.grpc = append(si.grpc, or)
		}
	}
	for _, si := range ox.services {
		sortOutbound(si.http)
		sortOutbound(si.grpc)
	}
	return ox
}

func sortOutbound(rs []*outboundRoute) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && routeLess(rs[j].created, rs[j-1].created, rs[j].meta, rs[j-1].meta); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}
