package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

type builder struct {
	cfg  *Config
	objs *Objects
	p    *problems

	namespaces map[string]*corev1.Namespace
	meshTLS    map[nsName]meshTLSResult
	networks   map[nsName]networkResult
	servers    map[string][]*serverSpec // by namespace
	serverByNm map[nsName]*serverSpec
	saz        map[string][]*serverAuthzSpec
	aps        map[string][]*apSpec
	httpRoutes []*httpRouteSpec
	grpcRoutes []*grpcRouteSpec
	// tcpRoutes and tlsRoutes are the translated TCPRoutes and TLSRoutes
	// (translate_streamroute.go), attached to their parents in
	// buildEgress, once both Services and EgressNetworks are known.
	tcpRoutes, tlsRoutes []*streamRoute
	// routes by the Server they attach to, and by name.
	httpByServer map[nsName][]*httpRouteSpec
	grpcByServer map[nsName][]*grpcRouteSpec
	httpByName   map[nsName][]*httpRouteSpec
	grpcByName   map[nsName]bool
	// notAttached says, per Server, which routes name it but are not
	// attached, and why (for explanations).
	notAttached     map[nsName][]string
	serviceAccounts map[nsName]bool
	// rateLimits holds the HTTPLocalRateLimitPolicy that applies to each
	// Server.
	rateLimits map[nsName]*rateLimitSpec
	// egressAccepted holds every EgressNetwork of the snapshot, true
	// when it is accepted (for the status of the routes naming it).
	egressAccepted map[nsName]bool
}

func (b *builder) build() *Index {
	cfg, p := b.cfg, b.p
	ix := &Index{
		cfg:       cfg,
		workloads: map[WorkloadRef]*workloadPolicy{},
		servers:   map[ObjectRef]*serverTemplate{},
	}

	b.namespaces = map[string]*corev1.Namespace{}
	for _, ns := range b.objs.Namespaces {
		b.namespaces[ns.Name] = ns
	}
	b.serviceAccounts = map[nsName]bool{}
	for _, sa := range b.objs.ServiceAccounts {
		b.serviceAccounts[nsName{sa.Namespace, sa.Name}] = true
	}
	for _, w := range b.objs.Workloads {
		b.serviceAccounts[nsName{w.Namespace, w.ServiceAccount}] = true
	}

	b.meshTLS = map[nsName]meshTLSResult{}
	for _, m := range b.objs.MeshTLSAuthentications {
		b.meshTLS[nsName{m.Namespace, m.Name}] = translateMeshTLS(cfg, p, m)
	}
	b.networks = map[nsName]networkResult{}
	for _, n := range b.objs.NetworkAuthentications {
		b.networks[nsName{n.Namespace, n.Name}] = translateNetworkAuthn(p, n)
	}

	b.servers = map[string][]*serverSpec{}
	b.serverByNm = map[nsName]*serverSpec{}
	for _, s := range b.objs.Servers {
		spec := translateServer(p, s)
		b.serverByNm[nsName{s.Namespace, s.Name}] = spec
		if spec.valid {
			b.servers[s.Namespace] = append(b.servers[s.Namespace], spec)
		}
	}
	// Older servers win port conflicts; then names decide.
	for _, list := range b.servers {
		sort.SliceStable(list, func(i, j int) bool { return olderFirst(&list[i].obj.ObjectMeta, &list[j].obj.ObjectMeta) })
	}

	b.saz = map[string][]*serverAuthzSpec{}
	for _, sa := range b.objs.ServerAuthorizations {
		spec, ok := translateServerAuthz(cfg, p, sa)
		if !ok {
			continue
		}
		if spec.name != "" {
			if _, found := b.serverByNm[nsName{sa.Namespace, spec.name}]; !found {
				p.warnf(spec.ref, "spec.server.name", "Server %s/%s not found; the authorization applies to nothing until it exists", sa.Namespace, spec.name)
			}
		}
		b.saz[sa.Namespace] = append(b.saz[sa.Namespace], spec)
	}

	b.aps = map[string][]*apSpec{}
	for _, ap := range b.objs.AuthorizationPolicies {
		spec, ok := translateAuthorizationPolicy(cfg, p, ap, b.meshTLS, b.networks)
		if !ok {
			continue
		}
		for _, src := range spec.authz.Sources {
			if src.Kind == "ServiceAccount" && !b.serviceAccounts[nsName{src.Namespace, src.Name}] {
				p.warnf(spec.ref, "spec.requiredAuthenticationRefs", "ServiceAccount %s/%s is not defined and no workload uses it", src.Namespace, src.Name)
			}
		}
		b.aps[ap.Namespace] = append(b.aps[ap.Namespace], spec)
	}

	b.translateRoutes()
	b.checkPolicyTargets()
	b.attachRateLimits()

	templates := map[nsName]*serverTemplate{}
	for ns, list := range b.servers {
		for _, s := range list {
			t := b.serverTemplate(ns, s)
			templates[nsName{ns, s.obj.Name}] = t
			ix.servers[s.ref] = t
		}
	}

	for _, w := range b.objs.Workloads {
		wp := b.workload(w, templates)
		ix.workloads[w.Ref()] = wp
	}

	for _, list := range b.servers {
		for _, s := range list {
			if s.selects == 0 {
				p.warnf(s.ref, "spec.podSelector", "selects no workload")
			}
		}
	}

	ix.outbound = b.buildOutbound()
	b.buildEgress(ix.outbound)
	ix.egressStatus = b.egressStatuses(ix.outbound)
	ix.routeStatus = b.routeStatuses()

	sort.SliceStable(p.list, func(i, j int) bool { return p.list[i].Severity > p.list[j].Severity })
	ix.problems = p.list
	return ix
}

func (b *builder) translateRoutes() {
	p := b.p
	for _, r := range b.objs.HTTPRoutes {
		rules := make([]routeRule, len(r.Spec.Rules))
		for i, rr := range r.Spec.Rules {
			rules[i].timeouts = rr.Timeouts
			for _, br := range rr.BackendRefs {
				rules[i].backends = append(rules[i].backends, gatewayv1.HTTPBackendRef{BackendRef: br.BackendRef})
			}
		}
		parents := translatePolicyParents(r.Namespace, r.Spec.ParentRefs)
		spec, ok := translateHTTPRoute(p, policyGroup, &r.ObjectMeta, parents, r.Spec.Hostnames, rules,
			func(i int) []gatewayv1.HTTPRouteMatch { return r.Spec.Rules[i].Matches })
		if ok {
			spec.emptyRules = r.Spec.Rules != nil && len(r.Spec.Rules) == 0
			b.httpRoutes = append(b.httpRoutes, spec)
		}
	}
	for _, r := range b.objs.GatewayHTTPRoutes {
		rules := make([]routeRule, len(r.Spec.Rules))
		for i, rr := range r.Spec.Rules {
			rules[i].timeouts = rr.Timeouts
			rules[i].backends = rr.BackendRefs
		}
		parents := translateParents(r.Namespace, r.Spec.ParentRefs)
		spec, ok := translateHTTPRoute(p, gatewayv1.GroupName, &r.ObjectMeta, parents, r.Spec.Hostnames, rules,
			func(i int) []gatewayv1.HTTPRouteMatch { return r.Spec.Rules[i].Matches })
		if ok {
			spec.emptyRules = r.Spec.Rules != nil && len(r.Spec.Rules) == 0
			if field, kind := unsupportedHTTPFilter(r.Spec.Rules, false); field != "" {
				spec.unsupported = kind
				p.warnf(spec.ref, field, "%s filters are not supported; the route is ignored, as Linkerd ignores it", kind)
			}
			if field, kind := unsupportedHTTPFilter(r.Spec.Rules, true); field != "" {
				spec.unsupportedOut = kind
				if spec.unsupported == "" {
					p.warnf(spec.ref, field, "%s filters are not supported; the route is ignored for outbound traffic, as Linkerd ignores it", kind)
				}
			}
			b.httpRoutes = append(b.httpRoutes, spec)
		}
	}
	for _, r := range b.objs.GRPCRoutes {
		spec, ok := translateGRPCRoute(p, r)
		if ok {
			if field, kind := unsupportedGRPCFilter(r.Spec.Rules); field != "" {
				spec.unsupported = kind
				p.warnf(spec.ref, field, "%s filters are not supported; the route is ignored, as Linkerd ignores it", kind)
			}
			b.grpcRoutes = append(b.grpcRoutes, spec)
		}
	}
	// check reports Server parents that do not exist, and why a route
	// attaches to no Server at all (Linkerd refuses the whole route then;
	// its other parents, such as Services, still count for outbound).
	check := func(ref ObjectRef, ns string, parents []parentRef) string {
		if field, why := serverParentProblem(ns, parents); field != "" {
			p.warnf(ref, field, "%s; the route attaches to no Server, as Linkerd refuses it", why)
			return why
		}
		for i, pr := range parents {
			if !isServerParent(pr) {
				continue
			}
			if _, found := b.serverByNm[nsName{ns, pr.name}]; !found {
				p.warnf(ref, fmt.Sprintf("spec.parentRefs[%d]", i), "Server %s/%s not found", ns, pr.name)
			}
		}
		return ""
	}
	b.httpByServer = map[nsName][]*httpRouteSpec{}
	b.grpcByServer = map[nsName][]*grpcRouteSpec{}
	b.httpByName = map[nsName][]*httpRouteSpec{}
	b.grpcByName = map[nsName]bool{}
	b.notAttached = map[nsName][]string{}
	// notAttached records, for every Server a route names, why it is not
	// attached.
	notAttached := func(ref ObjectRef, ns string, parents []parentRef, why string) {
		seen := map[string]bool{}
		for _, pr := range parents {
			if isServerParent(pr) && !seen[pr.name] {
				seen[pr.name] = true
				k := nsName{ns, pr.name}
				b.notAttached[k] = append(b.notAttached[k], ref.String()+" names this Server but is not attached: "+why)
			}
		}
	}
	for _, r := range b.grpcRoutes {
		r.noServer = check(r.ref, r.meta.Namespace, r.parents)
		b.grpcByName[nsName{r.meta.Namespace, r.meta.Name}] = true
		if why := ignoredWhy(r.unsupported, r.noServer); why != "" {
			notAttached(r.ref, r.meta.Namespace, r.parents, why)
			continue
		}
		for _, srv := range serverParents(r.parents, r.meta.Namespace) {
			b.grpcByServer[srv] = append(b.grpcByServer[srv], r)
		}
	}
	for _, r := range b.httpRoutes {
		r.noServer = check(r.ref, r.meta.Namespace, r.parents)
		b.httpByName[nsName{r.meta.Namespace, r.meta.Name}] = append(b.httpByName[nsName{r.meta.Namespace, r.meta.Name}], r)
		if why := ignoredWhy(r.unsupported, r.noServer); why != "" {
			notAttached(r.ref, r.meta.Namespace, r.parents, why)
			continue
		}
		for _, srv := range serverParents(r.parents, r.meta.Namespace) {
			// Linkerd's status controller does not accept an HTTPRoute on a
			// Server that a GRPCRoute also names (RouteReasonConflicted),
			// and its index attaches only accepted routes.
			if g := b.grpcByServer[srv]; len(g) > 0 {
				p.warnf(r.ref, "spec.parentRefs", "Server %s/%s also has GRPCRoute %s; a Server with GRPCRoutes does not accept HTTPRoutes (conflicted), so this route is not attached to it", srv.ns, srv.name, g[0].meta.Name)
				b.notAttached[srv] = append(b.notAttached[srv], r.ref.String()+" names this Server but is not attached: GRPCRoute "+g[0].meta.Name+" names it too (conflicted)")
				continue
			}
			b.httpByServer[srv] = append(b.httpByServer[srv], r)
		}
	}
}

// ignoredWhy says why a route is not attached to its Servers, or "".
func ignoredWhy(unsupported, noServer string) string {
	switch {
	case unsupported != "":
		return unsupported + " filters are not supported"
	case noServer != "":
		return noServer
	}
	return ""
}

// serverParents returns the Servers (in the route's namespace) a route
// attaches to, each once.
func serverParents(parents []parentRef, ns string) []nsName {
	var out []nsName
	seen := map[string]bool{}
	for _, pr := range parents {
		if isServerParent(pr) && pr.namespace == ns && !seen[pr.name] {
			seen[pr.name] = true
			out = append(out, nsName{ns, pr.name})
		}
	}
	return out
}

func (b *builder) checkPolicyTargets() {
	for ns, list := range b.aps {
		for _, ap := range list {
			switch ap.target {
			case targetServer:
				if _, found := b.serverByNm[nsName{ns, ap.targetName}]; !found {
					b.p.warnf(ap.ref, "spec.targetRef", "Server %s/%s not found; the policy applies to nothing until it exists", ns, ap.targetName)
				}
			case targetHTTPRoute:
				found, why := false, ""
				for _, r := range b.httpByName[nsName{ns, ap.targetName}] {
					if strings.EqualFold(r.group, ap.targetGroup) {
						found, why = true, ignoredWhy(r.unsupported, r.noServer)
					}
				}
				switch {
				case !found:
					b.p.warnf(ap.ref, "spec.targetRef", "HTTPRoute %s/%s (%s) not found; the policy applies to nothing until it exists", ns, ap.targetName, ap.targetGroup)
				case why != "":
					b.p.warnf(ap.ref, "spec.targetRef", "HTTPRoute %s/%s is not attached to any Server (%s); the policy grants nothing", ns, ap.targetName, why)
				}
			case targetGRPCRoute:
				found := b.grpcByName[nsName{ns, ap.targetName}]
				if !found {
					b.p.warnf(ap.ref, "spec.targetRef", "GRPCRoute %s/%s not found; the policy applies to nothing until it exists", ns, ap.targetName)
				}
			}
		}
	}
}

func (b *builder) routeAuthorizations(ns, group, kind, name string) []authz.Authorization {
	var out []authz.Authorization
	for _, ap := range b.aps[ns] {
		if !ap.usable {
			continue
		}
		switch {
		case kind == "HTTPRoute" && ap.target == targetHTTPRoute && ap.targetName == name && strings.EqualFold(ap.targetGroup, group):
		case kind == "GRPCRoute" && ap.target == targetGRPCRoute && ap.targetName == name:
		default:
			continue
		}
		out = append(out, ap.authz)
	}
	return out
}

func (b *builder) serverTemplate(ns string, s *serverSpec) *serverTemplate {
	t := &serverTemplate{spec: s, notAttached: b.notAttached[nsName{ns, s.obj.Name}]}
	srv := authz.Server{
		Meta:          metaOf("Server", &s.obj.ObjectMeta),
		Protocol:      s.protocol,
		DetectTimeout: b.cfg.DetectTimeout,
	}
	serverLabels := labels.Set(s.obj.Labels)
	for _, sa := range b.saz[ns] {
		if (sa.name != "" && sa.name == s.obj.Name) || (sa.selector != nil && sa.selector.Matches(serverLabels)) {
			srv.Authorizations = append(srv.Authorizations, sa.authz)
		}
	}
	for _, ap := range b.aps[ns] {
		if !ap.usable {
			continue
		}
		if (ap.target == targetServer && ap.targetName == s.obj.Name) || ap.target == targetNamespace {
			srv.Authorizations = append(srv.Authorizations, ap.authz)
		}
	}
	if s.access != nil {
		srv.Authorizations = append(srv.Authorizations, s.access.authorizations(b.cfg)...)
	}
	var routes []authz.HTTPRoute
	for _, r := range b.httpByServer[nsName{ns, s.obj.Name}] {
		route := r.route
		route.Authorizations = b.routeAuthorizations(ns, r.group, "HTTPRoute", r.meta.Name)
		routes = append(routes, route)
	}
	sortHTTPRoutes(routes)
	if len(routes) > 0 {
		t.explicitRoutes = true
		srv.HTTPRoutes = routes
	}
	var grpcRoutes []authz.GRPCRoute
	for _, r := range b.grpcByServer[nsName{ns, s.obj.Name}] {
		route := r.route
		route.Authorizations = b.routeAuthorizations(ns, gatewayv1.GroupName, "GRPCRoute", r.meta.Name)
		grpcRoutes = append(grpcRoutes, route)
	}
	if len(grpcRoutes) > 0 && s.protocol != authz.ProtocolGRPC {
		b.p.warnf(s.ref, "spec.proxyProtocol", "GRPCRoutes are attached but the protocol is %s; they apply only with proxyProtocol gRPC", s.protocol)
	}
	if len(routes) > 0 && s.protocol == authz.ProtocolGRPC {
		b.p.warnf(s.ref, "spec.proxyProtocol", "HTTPRoutes are attached but the protocol is gRPC; use GRPCRoutes")
	}
	if len(routes) > 0 && (s.protocol == authz.ProtocolOpaque || s.protocol == authz.ProtocolTLS) {
		b.p.warnf(s.ref, "spec.proxyProtocol", "HTTPRoutes are attached but the protocol is %s; they never apply", s.protocol)
	}
	sortGRPCRoutes(grpcRoutes)
	if len(grpcRoutes) == 0 {
		grpcRoutes = []authz.GRPCRoute{authz.DefaultGRPCRoute()}
	}
	srv.GRPCRoutes = grpcRoutes
	srv.RateLimit = b.serverRateLimit(s)
	t.server = srv
	return t
}

func sortHTTPRoutes(rs []authz.HTTPRoute) {
	sort.SliceStable(rs, func(i, j int) bool { return routeLess(rs[i].Created, rs[j].Created, rs[i].Meta, rs[j].Meta) })
}

func sortGRPCRoutes(rs []authz.GRPCRoute) {
	sort.SliceStable(rs, func(i, j int) bool { return routeLess(rs[i].Created, rs[j].Created, rs[i].Meta, rs[j].Meta) })
}

// routeLess orders routes as Linkerd's controller does: oldest first,
// routes with a timestamp before those without, then by name. Routes of
// one parent share its namespace, except where a Service's consumer
// routes join its producer routes; there the namespace only breaks a tie
// of names (Linkerd compares names alone).
func routeLess(a, b time.Time, am, bm authz.Meta) bool {
	if !a.Equal(b) {
		if a.IsZero() || b.IsZero() {
			return !a.IsZero()
		}
		return a.Before(b)
	}
	if am.Name != bm.Name {
		return am.Name < bm.Name
	}
	if am.Namespace != bm.Namespace {
		return am.Namespace < bm.Namespace
	}
	return am.Group < bm.Group
}

// olderFirst orders objects oldest first, those without a creation time
// last, then by name: the order in which Linkerd's controller lets one of
// several objects claiming the same thing win.
func olderFirst(x, y *metav1.ObjectMeta) bool {
	a, c := x.CreationTimestamp, y.CreationTimestamp
	if !a.Equal(&c) {
		if a.IsZero() || c.IsZero() {
			return !a.IsZero()
		}
		return a.Before(&c)
	}
	return x.Name < y.Name
}
