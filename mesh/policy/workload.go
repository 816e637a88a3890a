package policy

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
	"github.com/weftmesh/weft/mesh/ports"
)

// containerPorts returns the named and numbered TCP ports a workload
// declares (containers and sidecar init containers).
func containerPorts(w *Workload) (names map[string][]uint16, numbers map[uint16]string) {
	names = map[string][]uint16{}
	numbers = map[uint16]string{}
	add := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, p := range c.Ports {
				if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
					continue
				}
				if p.ContainerPort < 1 || p.ContainerPort > 65535 {
					continue
				}
				n := uint16(p.ContainerPort)
				numbers[n] = p.Name
				if p.Name != "" {
					names[p.Name] = append(names[p.Name], n)
				}
			}
		}
	}
	add(w.Containers, false)
	add(w.InitContainers, true)
	return names, numbers
}

// probePaths returns the HTTP probe paths of a workload by port, from its
// containers and its init containers (native sidecars, restartPolicy
// Always, are the init containers that may have probes), as Linkerd
// reads them. A named probe port is looked up among the same container's
// TCP ports, ignoring case.
func probePaths(w *Workload) map[uint16][]string {
	out := map[uint16][]string{}
	for _, c := range append(append([]corev1.Container(nil), w.Containers...), w.InitContainers...) {
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if pr == nil || pr.HTTPGet == nil {
				continue
			}
			var port uint16
			switch pr.HTTPGet.Port.Type {
			case intstr.Int:
				if pr.HTTPGet.Port.IntVal > 0 && pr.HTTPGet.Port.IntVal <= 65535 {
					port = uint16(pr.HTTPGet.Port.IntVal)
				}
			case intstr.String:
				for _, cp := range c.Ports {
					if cp.Protocol != "" && cp.Protocol != corev1.ProtocolTCP {
						continue
					}
					if strings.EqualFold(cp.Name, pr.HTTPGet.Port.StrVal) && cp.ContainerPort > 0 && cp.ContainerPort <= 65535 {
						port = uint16(cp.ContainerPort)
						break
					}
				}
			}
			if port == 0 {
				continue
			}
			path := pr.HTTPGet.Path
			if path == "" {
				path = "/"
			}
			raw, _, err := pathnorm.SplitTarget(path)
			if err != nil {
				continue
			}
			norm, err := pathnorm.Normalize(raw)
			if err != nil {
				continue
			}
			out[port] = append(out[port], norm)
		}
	}
	for port, ps := range out {
		sort.Strings(ps)
		out[port] = compactStrings(ps)
	}
	return out
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// probeRoute is the route that authorizes kubelet probes.
func probeRoute(cfg *Config, paths []string) (authz.HTTPRoute, bool) {
	if len(paths) == 0 || len(cfg.ProbeNetworks) == 0 {
		return authz.HTTPRoute{}, false
	}
	r := authz.HTTPRoute{Meta: authz.DefaultMeta("probe")}
	var rule authz.HTTPRule
	for _, p := range paths {
		rule.Matches = append(rule.Matches, authz.HTTPMatch{Method: "GET", Path: &authz.PathMatch{Kind: authz.PathExact, Value: p}})
	}
	r.Rules = []authz.HTTPRule{rule}
	a := authz.Authorization{Meta: authz.DefaultMeta("probe"), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}
	for _, n := range cfg.ProbeNetworks {
		a.Networks = append(a.Networks, authz.Network{Net: n})
	}
	r.Authorizations = []authz.Authorization{a}
	return r, true
}

// defaultRoutes are the routes of a server without HTTPRoutes.
func defaultRoutes(cfg *Config, paths []string) []authz.HTTPRoute {
	routes := []authz.HTTPRoute{authz.DefaultHTTPRoute()}
	if pr, ok := probeRoute(cfg, paths); ok {
		routes = append(routes, pr)
	}
	return routes
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
	wp := &workloadPolicy{w: w, ports: map[uint16]*portPolicy{}}

	// Meshed?
	wp.meshed, wp.meshedWhy = meshState(w, ns)

	// Default policy: pod, then namespace, then cluster.
	wp.defaultPolicy, wp.defaultFrom = cfg.DefaultPolicy, "the cluster default"
	if ns != nil {
		if v, ok := ns.Annotations[vocab.AnnotationDefaultInboundPolicy]; ok {
			if d, err := ParseDefaultPolicy(v); err == nil {
				wp.defaultPolicy, wp.defaultFrom = d, "the annotation on namespace "+ns.Name
			} else {
				p.warnf(ObjectRef{Kind: "Namespace", Name: ns.Name}, "metadata.annotations."+vocab.AnnotationDefaultInboundPolicy, "%v; using %s", err, wp.defaultPolicy)
			}
		}
	}
	if v, ok := w.Annotations[vocab.AnnotationDefaultInboundPolicy]; ok {
		if d, err := ParseDefaultPolicy(v); err == nil {
			wp.defaultPolicy, wp.defaultFrom = d, "the annotation on "+strings.ToLower(w.Kind)+" "+w.Name
		} else {
			p.warnf(ref, "metadata.annotations."+vocab.AnnotationDefaultInboundPolicy, "%v; using %s", err, wp.defaultPolicy)
		}
	}

	names, numbers := containerPorts(w)
	wp.names = names
	probes := probePaths(w)
	named := map[string]int32{}
	for name, ps := range names {
		named[name] = int32(ps[0])
	}
	var nsAnn map[string]string
	if ns != nil {
		nsAnn = ns.Annotations
	}

	// Opaque ports: one rule with the destination controller (mesh/ports).
	opaque, from, err := ports.OpaqueForPod(w.Annotations, nsAnn, named, declaredPorts(w), cfg.OpaquePorts)
	if err != nil {
		p.warnf(annotationOwner(ref, ns, from), "metadata.annotations."+vocab.AnnotationOpaquePorts, "%v; no port is opaque", err)
	}
	wp.opaque, wp.opaqueFrom = opaque, from
	if v, where := annotation(w, ns, vocab.AnnotationRequireIdentityInboundPorts); where != "" {
		set, err := ports.Parse(v, named)
		if err != nil {
			p.warnf(ref, "metadata.annotations."+vocab.AnnotationRequireIdentityInboundPorts, "%v", err)
		}
		wp.requireID = set
	}

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

	known := map[uint16]bool{}
	for n := range numbers {
		known[n] = true
	}
	for n := range probes {
		known[n] = true
	}
	for port := range known {
		if _, taken := wp.ports[port]; taken {
			continue
		}
		wp.ports[port] = &portPolicy{server: defaultServer(cfg, wp.policyFor(port), wp.opaque.Contains(uint32(port)), probes[port])}
	}
	authOnly := wp.defaultPolicy.withAuthenticatedOnly()
	wp.defaults = [4]*authz.Server{
		defaultServer(cfg, wp.defaultPolicy, false, nil), defaultServer(cfg, wp.defaultPolicy, true, nil),
		defaultServer(cfg, authOnly, false, nil), defaultServer(cfg, authOnly, true, nil),
	}
	return wp
}

// policyFor is the default policy of a port no Server selects: the
// workload's, in its authenticated form on ports listed in
// config.linkerd.io/proxy-require-identity-inbound-ports.
func (wp *workloadPolicy) policyFor(port uint16) DefaultPolicy {
	if wp.requireID.Contains(uint32(port)) {
		return wp.defaultPolicy.withAuthenticatedOnly()
	}
	return wp.defaultPolicy
}

// annotationOwner names the object an annotation was read from.
func annotationOwner(workload ObjectRef, ns *corev1.Namespace, from ports.Source) ObjectRef {
	if from == ports.FromNamespace && ns != nil {
		return ObjectRef{Kind: "Namespace", Name: ns.Name}
	}
	return workload
}

// declaredPorts lists every container port of a workload's containers and
// init containers: the ports the default opaque list is filtered by, as
// Linkerd's injector filters it.
func declaredPorts(w *Workload) []uint16 {
	var out []uint16
	for _, cs := range [][]corev1.Container{w.Containers, w.InitContainers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.ContainerPort > 0 && p.ContainerPort <= 65535 {
					out = append(out, uint16(p.ContainerPort))
				}
			}
		}
	}
	return out
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
	// proxyContainerLinkerd is the proxy container Linkerd injects; a
	// workload running it is meshed too.
	proxyContainerLinkerd = "linkerd-proxy"
)

func meshState(w *Workload, ns *corev1.Namespace) (Meshed, string) {
	for _, cs := range [][]corev1.Container{w.Containers, w.InitContainers} {
		for _, c := range cs {
			if c.Name == vocab.ProxyContainerName || c.Name == proxyContainerLinkerd {
				return MeshedYes, "it runs the " + c.Name + " container"
			}
		}
	}
	switch v := w.Annotations[vocab.AnnotationInject]; v {
	case vocab.InjectEnabled, vocab.InjectIngress:
		return MeshedYes, vocab.AnnotationInject + "=" + v + " on the pod template"
	case vocab.InjectDisabled:
		return MeshedNo, vocab.AnnotationInject + "=disabled on the pod template"
	}
	if ns != nil {
		switch v := ns.Annotations[vocab.AnnotationInject]; v {
		case vocab.InjectEnabled, vocab.InjectIngress:
			return MeshedYes, vocab.AnnotationInject + "=" + v + " on namespace " + ns.Name
		case vocab.InjectDisabled:
			return MeshedNo, vocab.AnnotationInject + "=disabled on namespace " + ns.Name
		}
		return MeshedNo, "neither the pod template nor namespace " + ns.Name + " has " + vocab.AnnotationInject
	}
	return MeshedUnknown, "namespace " + w.Namespace + " is not among the objects, so whether the workload is meshed is unknown"
}
