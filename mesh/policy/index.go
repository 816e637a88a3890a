package policy

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Severity grades a Problem.
type Severity uint8

// Severities.
const (
	// SeverityWarning: the object is used, but probably not as meant
	// (a lint), or it refers to something missing and grants nothing.
	SeverityWarning Severity = iota
	// SeverityError: the object is invalid and ignored.
	SeverityError
)

// String returns "warning" or "error".
func (s Severity) String() string {
	if s == SeverityError {
		return "error"
	}
	return "warning"
}

// Problem is something wrong with one object, found while indexing.
type Problem struct {
	Severity Severity
	Object   ObjectRef
	// Location is where the object was read from, when known.
	Location Location
	// Field is the path of the offending field ("spec.targetRef"), if any.
	Field   string
	Message string
}

// String renders "warning: web.yaml document 3: AuthorizationPolicy
// my-app/x: spec.targetRef: Server "nope" not found".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Severity.String())
	b.WriteString(": ")
	if l := p.Location.String(); l != "" {
		b.WriteString(l)
		b.WriteString(": ")
	}
	b.WriteString(p.Object.String())
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Meshed says whether a workload runs a proxy that enforces policy.
type Meshed uint8

// Mesh states.
const (
	// MeshedUnknown: nothing in the objects says; policy is evaluated as
	// if the workload were meshed.
	MeshedUnknown Meshed = iota
	MeshedYes
	MeshedNo
)

type portPolicy struct {
	server *authz.Server
	// fromServer is the Server resource that selected the port, nil for
	// a default policy.
	fromServer *ObjectRef
}

type workloadPolicy struct {
	w             *Workload
	meshed        Meshed
	meshedWhy     string
	defaultPolicy DefaultPolicy
	defaultFrom   string
	ports         map[uint16]*portPolicy
	names         map[string][]uint16
	detectDefault *authz.Server
	opaqueDefault *authz.Server
	opaque        map[uint16]bool
}

func (wp *workloadPolicy) lookup(port uint16) *portPolicy {
	if pp, ok := wp.ports[port]; ok {
		return pp
	}
	if wp.opaque[port] {
		return &portPolicy{server: wp.opaqueDefault}
	}
	return &portPolicy{server: wp.detectDefault}
}

// serverTemplate is the port policy a Server yields, before the probe
// routes of a particular workload are added.
type serverTemplate struct {
	spec   *serverSpec
	server authz.Server
	// explicitRoutes is true when HTTPRoutes are attached; then probes
	// get no automatic authorization.
	explicitRoutes bool
}

// Index is the translation of one Objects snapshot: the policy of every
// port of every workload, and the problems found. It is immutable and
// safe for concurrent use.
type Index struct {
	cfg       *Config
	objs      *Objects
	workloads map[WorkloadRef]*workloadPolicy
	byIP      map[netip.Addr]*workloadPolicy
	servers   map[ObjectRef]*serverTemplate
	problems  []Problem
	built     time.Time
	outbound  *outboundIndex
}

// Config returns the configuration the index was built with.
func (ix *Index) Config() *Config { return ix.cfg }

// Objects returns the snapshot the index was built from.
func (ix *Index) Objects() *Objects { return ix.objs }

// Problems returns the errors and warnings found while indexing, errors
// first.
func (ix *Index) Problems() []Problem { return ix.problems }

// Errors returns only the problems of SeverityError.
func (ix *Index) Errors() []Problem {
	var out []Problem
	for _, p := range ix.problems {
		if p.Severity == SeverityError {
			out = append(out, p)
		}
	}
	return out
}

// Build translates objs into an index. It never fails: invalid objects
// are ignored and reported as problems, as Linkerd's controller ignores
// them. cfg may be nil for the defaults.
func Build(objs *Objects, cfg *Config) *Index {
	if cfg == nil {
		cfg, _ = NewConfig()
	}
	if objs == nil {
		objs = &Objects{}
	}
	sorted := *objs
	sorted.Namespaces = append(sorted.Namespaces[:0:0], objs.Namespaces...)
	sorted.Workloads = append(sorted.Workloads[:0:0], objs.Workloads...)
	sorted.ServiceAccounts = append(sorted.ServiceAccounts[:0:0], objs.ServiceAccounts...)
	sorted.Services = append(sorted.Services[:0:0], objs.Services...)
	sorted.Servers = append(sorted.Servers[:0:0], objs.Servers...)
	sorted.ServerAuthorizations = append(sorted.ServerAuthorizations[:0:0], objs.ServerAuthorizations...)
	sorted.AuthorizationPolicies = append(sorted.AuthorizationPolicies[:0:0], objs.AuthorizationPolicies...)
	sorted.MeshTLSAuthentications = append(sorted.MeshTLSAuthentications[:0:0], objs.MeshTLSAuthentications...)
	sorted.NetworkAuthentications = append(sorted.NetworkAuthentications[:0:0], objs.NetworkAuthentications...)
	sorted.HTTPRoutes = append(sorted.HTTPRoutes[:0:0], objs.HTTPRoutes...)
	sorted.GatewayHTTPRoutes = append(sorted.GatewayHTTPRoutes[:0:0], objs.GatewayHTTPRoutes...)
	sorted.GRPCRoutes = append(sorted.GRPCRoutes[:0:0], objs.GRPCRoutes...)
	sorted.sortAll()

	b := &builder{cfg: cfg, objs: &sorted, p: &problems{objs: objs}}
	ix := b.build()
	ix.objs = objs
	ix.built = cfg.Clock()
	return ix
}

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
	// routes by the Server they attach to, and by name.
	httpByServer    map[nsName][]*httpRouteSpec
	grpcByServer    map[nsName][]*grpcRouteSpec
	httpByName      map[nsName][]*httpRouteSpec
	grpcByName      map[nsName]bool
	serviceAccounts map[nsName]bool
}

func (b *builder) build() *Index {
	cfg, p := b.cfg, b.p
	ix := &Index{
		cfg:       cfg,
		workloads: map[WorkloadRef]*workloadPolicy{},
		byIP:      map[netip.Addr]*workloadPolicy{},
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
		sort.SliceStable(list, func(i, j int) bool {
			a, c := list[i].obj.CreationTimestamp, list[j].obj.CreationTimestamp
			if !a.Equal(&c) {
				if a.IsZero() || c.IsZero() {
					return !a.IsZero()
				}
				return a.Before(&c)
			}
			return list[i].obj.Name < list[j].obj.Name
		})
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
		for _, ip := range w.IPs {
			ix.byIP[ip] = wp
		}
	}

	for _, list := range b.servers {
		for _, s := range list {
			if s.selects == 0 {
				p.warnf(s.ref, "spec.podSelector", "selects no workload")
			}
		}
	}

	ix.outbound = b.buildOutbound()

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
		parents := make([]parentRef, 0, len(r.Spec.ParentRefs))
		for _, pr := range r.Spec.ParentRefs {
			x := parentRef{group: gatewayv1.GroupName, kind: "Gateway", namespace: r.Namespace, name: string(pr.Name)}
			if pr.Group != nil {
				x.group = string(*pr.Group)
			}
			if pr.Kind != nil {
				x.kind = string(*pr.Kind)
			}
			if pr.Namespace != nil && *pr.Namespace != "" {
				x.namespace = string(*pr.Namespace)
			}
			if pr.Port != nil {
				x.port = *pr.Port
			}
			parents = append(parents, x)
		}
		spec, ok := translateHTTPRoute(p, policyGroup, &r.ObjectMeta, parents, r.Spec.Hostnames, rules,
			func(i int) []gatewayv1.HTTPRouteMatch { return r.Spec.Rules[i].Matches })
		if ok {
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
			b.httpRoutes = append(b.httpRoutes, spec)
		}
	}
	for _, r := range b.objs.GRPCRoutes {
		spec, ok := translateGRPCRoute(p, r)
		if ok {
			b.grpcRoutes = append(b.grpcRoutes, spec)
		}
	}
	check := func(ref ObjectRef, ns string, parents []parentRef) {
		for i, pr := range parents {
			if !strings.EqualFold(pr.group, policyGroup) || !strings.EqualFold(pr.kind, "Server") {
				continue
			}
			if pr.namespace != ns {
				p.warnf(ref, fmt.Sprintf("spec.parentRefs[%d].namespace", i), "a route can only attach to a Server in its own namespace")
				continue
			}
			if _, found := b.serverByNm[nsName{ns, pr.name}]; !found {
				p.warnf(ref, fmt.Sprintf("spec.parentRefs[%d]", i), "Server %s/%s not found", ns, pr.name)
			}
		}
	}
	b.httpByServer = map[nsName][]*httpRouteSpec{}
	b.grpcByServer = map[nsName][]*grpcRouteSpec{}
	b.httpByName = map[nsName][]*httpRouteSpec{}
	b.grpcByName = map[nsName]bool{}
	for _, r := range b.httpRoutes {
		check(r.ref, r.meta.Namespace, r.parents)
		b.httpByName[nsName{r.meta.Namespace, r.meta.Name}] = append(b.httpByName[nsName{r.meta.Namespace, r.meta.Name}], r)
		for _, srv := range serverParents(r.parents, r.meta.Namespace) {
			b.httpByServer[srv] = append(b.httpByServer[srv], r)
		}
	}
	for _, r := range b.grpcRoutes {
		check(r.ref, r.meta.Namespace, r.parents)
		b.grpcByName[nsName{r.meta.Namespace, r.meta.Name}] = true
		for _, srv := range serverParents(r.parents, r.meta.Namespace) {
			b.grpcByServer[srv] = append(b.grpcByServer[srv], r)
		}
	}
}

// serverParents returns the Servers (in the route's namespace) a route
// attaches to, each once.
func serverParents(parents []parentRef, ns string) []nsName {
	var out []nsName
	seen := map[string]bool{}
	for _, pr := range parents {
		if strings.EqualFold(pr.group, policyGroup) && strings.EqualFold(pr.kind, "Server") && pr.namespace == ns && !seen[pr.name] {
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
				found := false
				for _, r := range b.httpByName[nsName{ns, ap.targetName}] {
					if strings.EqualFold(r.group, ap.targetGroup) {
						found = true
					}
				}
				if !found {
					b.p.warnf(ap.ref, "spec.targetRef", "HTTPRoute %s/%s (%s) not found; the policy applies to nothing until it exists", ns, ap.targetName, ap.targetGroup)
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
	t := &serverTemplate{spec: s}
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
	t.server = srv
	return t
}

func sortHTTPRoutes(rs []authz.HTTPRoute) {
	sort.SliceStable(rs, func(i, j int) bool { return routeLess(rs[i].Created, rs[j].Created, rs[i].Meta, rs[j].Meta) })
}

func sortGRPCRoutes(rs []authz.GRPCRoute) {
	sort.SliceStable(rs, func(i, j int) bool { return routeLess(rs[i].Created, rs[j].Created, rs[i].Meta, rs[j].Meta) })
}

// routeLess orders routes as the Gateway API asks: oldest first, routes
// with a timestamp before those without, then by name.
func routeLess(a, b time.Time, am, bm authz.Meta) bool {
	if !a.Equal(b) {
		if a.IsZero() || b.IsZero() {
			return !a.IsZero()
		}
		return a.Before(b)
	}
	if am.Namespace+"/"+am.Name != bm.Namespace+"/"+bm.Name {
		return am.Namespace+"/"+am.Name < bm.Namespace+"/"+bm.Name
	}
	return am.Group < bm.Group
}

func annotation(w *Workload, ns *corev1.Namespace, key string) (string, string) {
	if v, ok := w.Annotations[key]; ok {
		return v, "pod"
	}
	if ns != nil {
		if v, ok := ns.Annotations[key]; ok {
			return v, "namespace"
		}
	}
	return "", ""
}

func (b *builder) workload(w *Workload, templates map[nsName]*serverTemplate) *workloadPolicy {
	cfg, p := b.cfg, b.p
	ns := b.namespaces[w.Namespace]
	ref := ObjectRef{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name}
	wp := &workloadPolicy{w: w, ports: map[uint16]*portPolicy{}, opaque: map[uint16]bool{}}

	// Meshed?
	wp.meshed, wp.meshedWhy = meshState(w, ns)

	// Default policy: pod, then namespace, then cluster.
	wp.defaultPolicy, wp.defaultFrom = cfg.DefaultPolicy, "the cluster default"
	if ns != nil {
		if v, ok := ns.Annotations[AnnotationDefaultInboundPolicy]; ok {
			if d, err := ParseDefaultPolicy(v); err == nil {
				wp.defaultPolicy, wp.defaultFrom = d, "the annotation on namespace "+ns.Name
			} else {
				p.warnf(ObjectRef{Kind: "Namespace", Name: ns.Name}, "metadata.annotations."+AnnotationDefaultInboundPolicy, "%v; using %s", err, wp.defaultPolicy)
			}
		}
	}
	if v, ok := w.Annotations[AnnotationDefaultInboundPolicy]; ok {
		if d, err := ParseDefaultPolicy(v); err == nil {
			wp.defaultPolicy, wp.defaultFrom = d, "the annotation on "+strings.ToLower(w.Kind)+" "+w.Name
		} else {
			p.warnf(ref, "metadata.annotations."+AnnotationDefaultInboundPolicy, "%v; using %s", err, wp.defaultPolicy)
		}
	}

	// Opaque ports.
	if v, from := annotation(w, ns, AnnotationOpaquePorts); from != "" {
		set, err := parsePortSet(v)
		if err != nil {
			p.warnf(ref, "metadata.annotations."+AnnotationOpaquePorts, "%v", err)
		}
		wp.opaque = set
		if wp.opaque == nil {
			wp.opaque = map[uint16]bool{}
		}
	} else {
		for _, port := range cfg.OpaquePorts {
			wp.opaque[port] = true
		}
	}
	requireID := map[uint16]bool{}
	if v, from := annotation(w, ns, AnnotationRequireIdentityPorts); from != "" {
		set, err := parsePortSet(v)
		if err != nil {
			p.warnf(ref, "metadata.annotations."+AnnotationRequireIdentityPorts, "%v", err)
		}
		if set != nil {
			requireID = set
		}
	}

	names, numbers := containerPorts(w)
	wp.names = names
	probes := probePaths(w)

	podLabels := labels.Set(w.Labels)
	for _, s := range b.servers[w.Namespace] {
		if !s.selector.Matches(podLabels) {
			continue
		}
		s.selects++
		var ports []uint16
		if s.port.Type == intstr.Int {
			n := uint16(s.port.IntVal)
			ports = []uint16{n}
			if _, declared := numbers[n]; !declared {
				p.warnf(s.ref, "spec.port", "port %d is not declared by any container of %s %s", n, w.Kind, w.Name)
			}
		} else {
			ports = names[s.port.StrVal]
			if len(ports) == 0 {
				p.warnf(s.ref, "spec.port", "no container of %s %s declares a port named %q", w.Kind, w.Name, s.port.StrVal)
			}
		}
		t := templates[nsName{w.Namespace, s.obj.Name}]
		for _, port := range ports {
			if prev, taken := wp.ports[port]; taken {
				p.warnf(s.ref, "spec.podSelector", "overlaps Server %s on port %d of %s %s; %s is used", prev.fromServer.Name, port, w.Kind, w.Name, prev.fromServer.Name)
				continue
			}
			srv := t.server
			if !t.explicitRoutes {
				srv.HTTPRoutes = defaultRoutes(cfg, probes[port])
			}
			sref := s.ref
			wp.ports[port] = &portPolicy{server: &srv, fromServer: &sref}
		}
	}

	policyFor := func(port uint16) DefaultPolicy {
		if requireID[port] {
			return wp.defaultPolicy.withAuthenticatedOnly()
		}
		return wp.defaultPolicy
	}
	known := map[uint16]bool{}
	for n := range numbers {
		known[n] = true
	}
	for n := range probes {
		known[n] = true
	}
	for n := range requireID {
		known[n] = true
	}
	for port := range known {
		if _, taken := wp.ports[port]; taken {
			continue
		}
		wp.ports[port] = &portPolicy{server: defaultServer(cfg, policyFor(port), wp.opaque[port], probes[port])}
	}
	wp.detectDefault = defaultServer(cfg, wp.defaultPolicy, false, nil)
	wp.opaqueDefault = defaultServer(cfg, wp.defaultPolicy, true, nil)
	return wp
}

func defaultServer(cfg *Config, d DefaultPolicy, opaque bool, probes []string) *authz.Server {
	s := &authz.Server{
		Meta:           authz.DefaultMeta(d.String()),
		Protocol:       authz.ProtocolDetect,
		DetectTimeout:  cfg.DetectTimeout,
		Authorizations: d.authorizations(cfg),
		HTTPRoutes:     defaultRoutes(cfg, probes),
	}
	if opaque {
		s.Protocol = authz.ProtocolOpaque
		s.HTTPRoutes = nil
	}
	return s
}

const (
	proxyContainerWeft    = "weft-proxy"
	proxyContainerLinkerd = "linkerd-proxy"
)

func meshState(w *Workload, ns *corev1.Namespace) (Meshed, string) {
	for _, cs := range [][]corev1.Container{w.Containers, w.InitContainers} {
		for _, c := range cs {
			if c.Name == proxyContainerWeft || c.Name == proxyContainerLinkerd {
				return MeshedYes, "it runs the " + c.Name + " container"
			}
		}
	}
	switch v := w.Annotations[AnnotationInject]; v {
	case "enabled", "ingress":
		return MeshedYes, AnnotationInject + "=" + v + " on the pod template"
	case "disabled":
		return MeshedNo, AnnotationInject + "=disabled on the pod template"
	}
	if ns != nil {
		switch v := ns.Annotations[AnnotationInject]; v {
		case "enabled", "ingress":
			return MeshedYes, AnnotationInject + "=" + v + " on namespace " + ns.Name
		case "disabled":
			return MeshedNo, AnnotationInject + "=disabled on namespace " + ns.Name
		}
		return MeshedNo, "neither the pod template nor namespace " + ns.Name + " has " + AnnotationInject
	}
	return MeshedUnknown, "namespace " + w.Namespace + " is not among the objects, so whether the workload is meshed is unknown"
}

// Lookup returns the policy of a workload's port, as the Inbound API
// serves it, and false when the workload is unknown. It does not
// allocate for ports a Server selects or the workload declares.
func (ix *Index) Lookup(ref WorkloadRef, port uint16) (*authz.Server, bool) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return nil, false
	}
	if pp, ok := wp.ports[port]; ok {
		return pp.server, true
	}
	if wp.opaque[port] {
		return wp.opaqueDefault, true
	}
	return wp.detectDefault, true
}

// Workload returns a workload by reference.
func (ix *Index) Workload(ref WorkloadRef) (*Workload, bool) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return nil, false
	}
	return wp.w, true
}

// WorkloadByIP returns the pod with the address.
func (ix *Index) WorkloadByIP(ip netip.Addr) (*Workload, bool) {
	wp, ok := ix.byIP[ip.Unmap()]
	if !ok {
		return nil, false
	}
	return wp.w, true
}

// Workloads returns every workload reference, sorted.
func (ix *Index) Workloads() []WorkloadRef {
	out := make([]WorkloadRef, 0, len(ix.workloads))
	for r := range ix.workloads {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return out
}

// ResolvePort turns a port number or container port name into a number.
// A name must be declared by a container of the workload; when several
// containers declare it, the lowest number is used.
func (ix *Index) ResolvePort(ref WorkloadRef, port intstr.IntOrString) (uint16, error) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return 0, fmt.Errorf("policy: workload %s not found", ref)
	}
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return 0, fmt.Errorf("policy: port %d is out of range 1-65535", port.IntVal)
		}
		return uint16(port.IntVal), nil
	}
	ps := wp.names[port.StrVal]
	if len(ps) == 0 {
		return 0, fmt.Errorf("policy: no container of %s declares a port named %q", ref, port.StrVal)
	}
	min := ps[0]
	for _, p := range ps {
		if p < min {
			min = p
		}
	}
	return min, nil
}
