package policy

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// ControllerName is the controllerName Weft's policy controller writes in
// the status.parents entries it owns. It is Linkerd's value: Weft stands
// in for Linkerd's policy controller (the two never serve one cluster's
// proxies together), and tools and scripts written for Linkerd look for
// this name. docs/policy.md says why.
const ControllerName = "linkerd.io/policy-controller"

// Condition reasons Weft writes besides the Gateway API's own. Linkerd
// uses the first for an HTTPRoute whose parent also has a GRPCRoute.
const (
	ReasonRouteConflicted = "RouteReasonConflicted"
)

// maxStatusParents is the Gateway API's limit on status.parents.
const maxStatusParents = 32

// maxConditionMessage bounds a condition's message; the API allows 32768
// bytes, a person reads far less.
const maxConditionMessage = 1024

// RouteStatus is what policy says about one route's parents: the
// status.parents entries the route carries now and the ones Weft's policy
// controller owns, computed from the index. Only parents Weft serves get
// an entry: policy.linkerd.io Servers (inbound) and core Services
// (outbound); a Gateway or any other parent kind is left to its own
// controller.
type RouteStatus struct {
	// Group is the route's API group (policy.linkerd.io or
	// gateway.networking.k8s.io), Kind HTTPRoute, GRPCRoute, TCPRoute or
	// TLSRoute.
	Group, Kind     string
	Namespace, Name string
	// ResourceVersion is the version of the object Current was read
	// from, for an optimistic write.
	ResourceVersion string
	// Current is status.parents as the object carries it.
	Current []gatewayv1.RouteParentStatus
	// Parents are the entries Weft owns, one per distinct Server or
	// Service parent, with ControllerName and zero LastTransitionTimes.
	Parents []gatewayv1.RouteParentStatus
}

// Ref renders the route as problems name it.
func (s RouteStatus) Ref() ObjectRef {
	kind := s.Kind
	if s.Kind == "HTTPRoute" {
		kind += "." + s.Group
	}
	return ObjectRef{Kind: kind, Namespace: s.Namespace, Name: s.Name}
}

// Merge returns the status.parents to write: the entries of other
// controllers as they are and in their order, then Weft's. A condition
// keeps the LastTransitionTime it carries when its status did not change;
// otherwise it gets now. changed is false when the result equals Current,
// so a writer that writes only on change never writes twice for the same
// state. At most 32 entries are kept (the API's limit), other
// controllers' first.
func (s RouteStatus) Merge(now time.Time) (parents []gatewayv1.RouteParentStatus, changed bool) {
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	var mine []gatewayv1.RouteParentStatus
	for _, p := range s.Current {
		if string(p.ControllerName) == ControllerName {
			mine = append(mine, p)
			continue
		}
		parents = append(parents, p)
	}
	for _, want := range s.Parents {
		if len(parents) >= maxStatusParents {
			break
		}
		p := gatewayv1.RouteParentStatus{ParentRef: want.ParentRef, ControllerName: want.ControllerName}
		var prev []metav1.Condition
		for _, m := range mine {
			if sameParentRef(m.ParentRef, want.ParentRef) {
				prev = m.Conditions
				break
			}
		}
		for _, c := range want.Conditions {
			c.LastTransitionTime = ts
			for _, o := range prev {
				if o.Type == c.Type && o.Status == c.Status {
					c.LastTransitionTime = o.LastTransitionTime
				}
			}
			p.Conditions = append(p.Conditions, c)
		}
		parents = append(parents, p)
	}
	return parents, !sameParents(parents, s.Current)
}

// sameParents compares two status.parents lists as the API server stores
// them (their JSON), so times compare at the second.
func sameParents(a, b []gatewayv1.RouteParentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 {
		return true // absent and empty lists read the same
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func sameParentRef(a, b gatewayv1.ParentReference) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// RouteStatuses returns the status of every HTTPRoute (both groups),
// GRPCRoute, TCPRoute and TLSRoute in the snapshot, including routes with no parent Weft owns
// (whose Parents are empty, so Merge removes entries Weft wrote before).
// It is a pure function of the index.
func (ix *Index) RouteStatuses() []RouteStatus { return ix.routeStatus }

// routeFacts is what the builder knows about one route, for its status.
type routeFacts struct {
	group, kind string
	meta        *metav1.ObjectMeta
	parents     []parentRef
	backends    []gatewayv1.BackendObjectReference
	current     []gatewayv1.RouteParentStatus
	// invalid is the first error found translating the route (it is
	// then ignored); http, grpc or stream (a TCPRoute or TLSRoute) is
	// the translation otherwise.
	invalid string
	http    *httpRouteSpec
	grpc    *grpcRouteSpec
	stream  *streamRoute
}

func backendObjects[T any](rules []T, refs func(T) []gatewayv1.BackendRef) []gatewayv1.BackendObjectReference {
	var out []gatewayv1.BackendObjectReference
	for _, r := range rules {
		for _, br := range refs(r) {
			out = append(out, br.BackendObjectReference)
		}
	}
	return out
}

// routeStatuses computes the status of every route once the inbound and
// outbound indexes are built.
func (b *builder) routeStatuses() []RouteStatus {
	httpSpecs := map[ObjectRef]*httpRouteSpec{}
	for _, r := range b.httpRoutes {
		httpSpecs[r.ref] = r
	}
	grpcSpecs := map[ObjectRef]*grpcRouteSpec{}
	for _, r := range b.grpcRoutes {
		grpcSpecs[r.ref] = r
	}
	streamSpecs := map[ObjectRef]*streamRoute{}
	for _, r := range append(append([]*streamRoute(nil), b.tcpRoutes...), b.tlsRoutes...) {
		streamSpecs[r.ref] = r
	}
	firstError := b.firstErrors()
	var facts []routeFacts
	for _, r := range b.objs.HTTPRoutes {
		f := routeFacts{group: policyGroup, kind: "HTTPRoute", meta: &r.ObjectMeta,
			parents: translatePolicyParents(r.Namespace, r.Spec.ParentRefs), current: r.Status.Parents}
		for _, rule := range r.Spec.Rules {
			for _, br := range rule.BackendRefs {
				f.backends = append(f.backends, br.BackendObjectReference)
			}
		}
		facts = append(facts, f)
	}
	for _, r := range b.objs.GatewayHTTPRoutes {
		f := routeFacts{group: gatewayv1.GroupName, kind: "HTTPRoute", meta: &r.ObjectMeta,
			parents: translateParents(r.Namespace, r.Spec.ParentRefs), current: r.Status.Parents}
		f.backends = backendObjects(r.Spec.Rules, func(rule gatewayv1.HTTPRouteRule) []gatewayv1.BackendRef {
			var out []gatewayv1.BackendRef
			for _, br := range rule.BackendRefs {
				out = append(out, br.BackendRef)
			}
			return out
		})
		facts = append(facts, f)
	}
	for _, r := range b.objs.GRPCRoutes {
		f := routeFacts{group: gatewayv1.GroupName, kind: "GRPCRoute", meta: &r.ObjectMeta,
			parents: translateParents(r.Namespace, r.Spec.ParentRefs), current: r.Status.Parents}
		f.backends = backendObjects(r.Spec.Rules, func(rule gatewayv1.GRPCRouteRule) []gatewayv1.BackendRef {
			var out []gatewayv1.BackendRef
			for _, br := range rule.BackendRefs {
				out = append(out, br.BackendRef)
			}
			return out
		})
		facts = append(facts, f)
	}
	for _, r := range b.objs.TCPRoutes {
		f := routeFacts{group: gatewayv1.GroupName, kind: "TCPRoute", meta: &r.ObjectMeta,
			parents: translateParents(r.Namespace, r.Spec.ParentRefs), current: r.Status.Parents}
		f.backends = backendObjects(r.Spec.Rules, func(rule gatewayv1.TCPRouteRule) []gatewayv1.BackendRef { return rule.BackendRefs })
		facts = append(facts, f)
	}
	for _, r := range b.objs.TLSRoutes {
		f := routeFacts{group: gatewayv1.GroupName, kind: "TLSRoute", meta: &r.ObjectMeta,
			parents: translateParents(r.Namespace, r.Spec.ParentRefs), current: r.Status.Parents}
		f.backends = backendObjects(r.Spec.Rules, func(rule gatewayv1.TLSRouteRule) []gatewayv1.BackendRef { return rule.BackendRefs })
		facts = append(facts, f)
	}
	services := map[nsName]*corev1.Service{}
	for _, s := range b.objs.Services {
		services[nsName{s.Namespace, s.Name}] = s
	}
	out := make([]RouteStatus, 0, len(facts))
	for i := range facts {
		f := &facts[i]
		st := RouteStatus{Group: f.group, Kind: f.kind, Namespace: f.meta.Namespace, Name: f.meta.Name,
			ResourceVersion: f.meta.ResourceVersion, Current: f.current}
		ref := st.Ref()
		switch f.kind {
		case "GRPCRoute":
			f.grpc = grpcSpecs[ref]
		case "TCPRoute", "TLSRoute":
			f.stream = streamSpecs[ref]
		default:
			f.http = httpSpecs[ref]
		}
		if f.http == nil && f.grpc == nil && f.stream == nil {
			f.invalid = firstError[ref]
			if f.invalid == "" {
				f.invalid = "the route is invalid"
			}
		}
		type parentKey struct {
			kind string
			parentRef
		}
		seen := map[parentKey]bool{}
		for _, pr := range f.parents {
			var ps gatewayv1.RouteParentStatus
			var kind string
			switch {
			case isServerParent(pr):
				kind = "Server"
				ps = b.serverParentStatus(f, pr)
			case isServiceParent(pr):
				kind = "Service"
				ps = b.serviceParentStatus(f, pr, services)
			case isEgressParent(pr):
				kind = "EgressNetwork"
				ps = b.egressParentStatus(f, pr, services)
			default:
				continue
			}
			key := parentKey{kind: kind, parentRef: parentRef{namespace: pr.namespace, name: pr.name, port: pr.port, hasPort: pr.hasPort, section: pr.section}}
			if seen[key] {
				continue
			}
			seen[key] = true
			for j := range ps.Conditions {
				ps.Conditions[j].ObservedGeneration = f.meta.Generation
				if len(ps.Conditions[j].Message) > maxConditionMessage {
					ps.Conditions[j].Message = strings.ToValidUTF8(ps.Conditions[j].Message[:maxConditionMessage], "")
				}
			}
			st.Parents = append(st.Parents, ps)
		}
		out = append(out, st)
	}
	return out
}

func condition(typ gatewayv1.RouteConditionType, ok bool, reason, format string, args ...any) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(typ), Status: status, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func accepted(ok bool, reason gatewayv1.RouteConditionReason, format string, args ...any) metav1.Condition {
	return condition(gatewayv1.RouteConditionAccepted, ok, string(reason), format, args...)
}

// notUsable says why a route is ignored as a whole (an invalid field, an
// unsupported filter on the side that parent serves), or "".
func (f *routeFacts) notUsable(outbound bool) string {
	switch {
	case f.invalid != "":
		return f.invalid
	case f.grpc != nil && f.grpc.unsupported != "":
		return f.grpc.unsupported + " filters are not supported"
	case f.http != nil && !outbound && f.http.unsupported != "":
		return f.http.unsupported + " filters are not supported"
	case f.http != nil && outbound && f.http.unsupportedOut != "":
		return f.http.unsupportedOut + " filters are not supported"
	}
	return ""
}

// ourParentStatus is this controller's status entry for parent pr, of
// the given group and kind, without conditions.
func ourParentStatus(group, kind string, pr parentRef) gatewayv1.RouteParentStatus {
	g, k := gatewayv1.Group(group), gatewayv1.Kind(kind)
	ns := gatewayv1.Namespace(pr.namespace)
	ps := gatewayv1.RouteParentStatus{
		ParentRef:      gatewayv1.ParentReference{Group: &g, Kind: &k, Namespace: &ns, Name: gatewayv1.ObjectName(pr.name)},
		ControllerName: ControllerName,
	}
	if pr.hasPort {
		port := gatewayv1.PortNumber(pr.port)
		ps.ParentRef.Port = &port
	}
	return ps
}

// serverParentStatus is the Accepted condition of a Server parent, as
// the inbound index attaches (or refuses) the route.
func (b *builder) serverParentStatus(f *routeFacts, pr parentRef) gatewayv1.RouteParentStatus {
	ps := ourParentStatus(policyGroup, "Server", pr)
	if pr.section != "" {
		section := gatewayv1.SectionName(pr.section)
		ps.ParentRef.SectionName = &section
	}
	srvKey := nsName{pr.namespace, pr.name}
	srv := b.serverByNm[srvKey]
	var c metav1.Condition
	switch {
	case f.notUsable(false) != "":
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "%s; the route is ignored", f.notUsable(false))
	case f.http != nil && f.http.noServer != "":
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "%s; the route attaches to no Server", f.http.noServer)
	case f.grpc != nil && f.grpc.noServer != "":
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "%s; the route attaches to no Server", f.grpc.noServer)
	case srv == nil:
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "Server %s/%s not found", pr.namespace, pr.name)
	case !srv.valid:
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "Server %s/%s is invalid and ignored", pr.namespace, pr.name)
	case f.http != nil && len(b.grpcByServer[srvKey]) > 0:
		c = accepted(false, ReasonRouteConflicted, "GRPCRoute %s also names Server %s; a Server with GRPCRoutes does not take HTTPRoutes", b.grpcByServer[srvKey][0].meta.Name, pr.name)
	case f.http != nil && srv.protocol == authz.ProtocolGRPC:
		c = accepted(false, gatewayv1.RouteReasonNotAllowedByListeners, "Server %s has proxyProtocol gRPC, which takes GRPCRoutes only; this HTTPRoute never applies (use a GRPCRoute)", pr.name)
	case f.http != nil && (srv.protocol == authz.ProtocolOpaque || srv.protocol == authz.ProtocolTLS):
		c = accepted(false, gatewayv1.RouteReasonNotAllowedByListeners, "Server %s has proxyProtocol %s, which carries no HTTP; this HTTPRoute never applies", pr.name, srv.protocol)
	case f.grpc != nil && srv.protocol != authz.ProtocolGRPC:
		c = accepted(false, gatewayv1.RouteReasonNotAllowedByListeners, "Server %s has proxyProtocol %s; GRPCRoutes apply only to a Server with proxyProtocol gRPC", pr.name, srv.protocol)
	default:
		c = accepted(true, gatewayv1.RouteReasonAccepted, "")
	}
	ps.Conditions = []metav1.Condition{c}
	return ps
}

// serviceParentStatus is the Accepted and ResolvedRefs conditions of a
// Service parent, as the outbound index uses (or ignores) the route. A
// route in another namespace than the Service (a consumer route) is
// judged alike, as Linkerd judges it: the status says the parent took
// the route, which it serves to clients of the route's namespace.
func (b *builder) serviceParentStatus(f *routeFacts, pr parentRef, services map[nsName]*corev1.Service) gatewayv1.RouteParentStatus {
	ps := ourParentStatus("core", "Service", pr)
	svc := services[nsName{pr.namespace, pr.name}]
	var c metav1.Condition
	switch {
	case f.notUsable(true) != "":
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "%s; the route is ignored", f.notUsable(true))
	case svc == nil:
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "Service %s/%s not found", pr.namespace, pr.name)
	case svc.Spec.Type == corev1.ServiceTypeExternalName || svc.Spec.ClusterIP == "" || strings.EqualFold(svc.Spec.ClusterIP, corev1.ClusterIPNone):
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "parent service must have a ClusterIP")
	case f.http != nil && b.grpcOnParent(pr, isServiceParent):
		c = accepted(false, ReasonRouteConflicted, "a GRPCRoute also names Service %s; the Service's gRPC routes are used", pr.name)
	case b.outranking(f, pr, isServiceParent) != "":
		c = accepted(false, ReasonRouteConflicted, "a %s also names Service %s; it is used instead", b.outranking(f, pr, isServiceParent), pr.name)
	default:
		c = accepted(true, gatewayv1.RouteReasonAccepted, "")
	}
	ps.Conditions = []metav1.Condition{c, b.backendsResolved(f, pr, services)}
	return ps
}

// egressParentStatus is the Accepted and ResolvedRefs conditions of an
// EgressNetwork parent, as Linkerd writes them: the parent is accepted
// when the EgressNetwork exists and is itself accepted
// (EgressNetworkStatus), unless a GRPCRoute also names it.
func (b *builder) egressParentStatus(f *routeFacts, pr parentRef, services map[nsName]*corev1.Service) gatewayv1.RouteParentStatus {
	ps := ourParentStatus(policyGroup, "EgressNetwork", pr)
	acceptedNet, exists := b.egressAccepted[nsName{pr.namespace, pr.name}]
	var c metav1.Condition
	switch {
	case f.notUsable(true) != "":
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "%s; the route is ignored", f.notUsable(true))
	case pr.namespace != f.meta.Namespace:
		c = accepted(false, gatewayv1.RouteReasonUnsupportedValue, "routes for an EgressNetwork in another namespace are not supported")
	case !exists:
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "EgressNetwork %s/%s not found", pr.namespace, pr.name)
	case !acceptedNet:
		// Linkerd's words.
		c = accepted(false, gatewayv1.RouteReasonNoMatchingParent, "EgressNetwork parent has not been accepted")
	case f.http != nil && b.grpcOnParent(pr, isEgressParent):
		c = accepted(false, ReasonRouteConflicted, "a GRPCRoute also names EgressNetwork %s; the EgressNetwork's gRPC routes are used", pr.name)
	case b.outranking(f, pr, isEgressParent) != "":
		c = accepted(false, ReasonRouteConflicted, "a %s also names EgressNetwork %s; it is used instead", b.outranking(f, pr, isEgressParent), pr.name)
	default:
		c = accepted(true, gatewayv1.RouteReasonAccepted, "")
	}
	ps.Conditions = []metav1.Condition{c, b.backendsResolved(f, pr, services)}
	return ps
}

// grpcOnParent says whether a usable GRPCRoute has the same parent
// (of the kind is says, name and port) as pr.
func (b *builder) grpcOnParent(pr parentRef, is func(parentRef) bool) bool {
	for _, g := range b.grpcRoutes {
		if g.unsupported == "" && sameParent(g.parents, pr, is) {
			return true
		}
	}
	return false
}

// sameParent says whether parents hold pr (of the kind is says, name and
// port).
func sameParent(parents []parentRef, pr parentRef, is func(parentRef) bool) bool {
	for _, p := range parents {
		if is(p) && p.namespace == pr.namespace && p.name == pr.name && p.hasPort == pr.hasPort && p.port == pr.port {
			return true
		}
	}
	return false
}

// outranking names the kind of route that takes parent pr of f's
// TCPRoute or TLSRoute before it, "" when none does: as the outbound
// index serves a parent port, a GRPCRoute or HTTPRoute comes before a
// TLSRoute, and any of those before a TCPRoute (Linkerd's order).
func (b *builder) outranking(f *routeFacts, pr parentRef, is func(parentRef) bool) string {
	if f.stream == nil {
		return ""
	}
	if b.grpcOnParent(pr, is) {
		return "GRPCRoute"
	}
	for _, h := range b.httpRoutes {
		if h.unsupportedOut == "" && sameParent(h.parents, pr, is) {
			return "HTTPRoute"
		}
	}
	if f.kind == "TCPRoute" {
		for _, r := range b.tlsRoutes {
			if sameParent(r.parents, pr, is) {
				return "TLSRoute"
			}
		}
	}
	return ""
}

// backendsResolved is the ResolvedRefs condition of the route under
// parent pr: every backendRef is a core Service that exists, or, as in
// Linkerd, the EgressNetwork that is pr itself.
func (b *builder) backendsResolved(f *routeFacts, pr parentRef, services map[nsName]*corev1.Service) metav1.Condition {
	for _, br := range f.backends {
		group, kind := "", "Service"
		if br.Group != nil {
			group = string(*br.Group)
		}
		if br.Kind != nil {
			kind = string(*br.Kind)
		}
		ns := f.meta.Namespace
		if br.Namespace != nil && *br.Namespace != "" {
			ns = string(*br.Namespace)
		}
		if strings.EqualFold(group, policyGroup) && strings.EqualFold(kind, "EgressNetwork") {
			if _, ok := b.egressAccepted[nsName{ns, string(br.Name)}]; !ok {
				return condition(gatewayv1.RouteConditionResolvedRefs, false, string(gatewayv1.RouteReasonBackendNotFound), "backend EgressNetwork %s/%s not found", ns, br.Name)
			}
			if !isEgressParent(pr) || pr.namespace != ns || pr.name != string(br.Name) {
				// Linkerd's words.
				return condition(gatewayv1.RouteConditionResolvedRefs, false, string(gatewayv1.RouteReasonInvalidKind), "EgressNetwork backend needs to be on a route that has an EgressNetwork parent")
			}
			continue
		}
		if !isCoreGroup(group) || kind != "Service" {
			return condition(gatewayv1.RouteConditionResolvedRefs, false, string(gatewayv1.RouteReasonInvalidKind), "backend %s %s is not a Service", groupKind(group, kind), br.Name)
		}
		if services[nsName{ns, string(br.Name)}] == nil {
			return condition(gatewayv1.RouteConditionResolvedRefs, false, string(gatewayv1.RouteReasonBackendNotFound), "backend Service %s/%s not found", ns, br.Name)
		}
	}
	return condition(gatewayv1.RouteConditionResolvedRefs, true, string(gatewayv1.RouteReasonResolvedRefs), "")
}
