package discovery

import (
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/mesh/ports"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dependency records what a topic's last computation read, so the index
// knows when to recompute it.
type dependency struct {
	service    ServiceID // the service the target resolved to, if any
	namespace  string    // the namespace whose annotations were read
	ip         netip.Addr
	profileKey [2]objKey // ServiceProfiles looked up (client ns, service ns)
}

func (d dependency) affectedBy(t *touched) bool {
	if t.all {
		return true
	}
	if d.service != (ServiceID{}) {
		if _, ok := t.services[d.service]; ok {
			return true
		}
	}
	if d.namespace != "" {
		if _, ok := t.namespaces[d.namespace]; ok {
			return true
		}
	}
	if d.ip.IsValid() {
		if _, ok := t.ips[d.ip]; ok {
			return true
		}
	}
	for _, k := range d.profileKey {
		if k != (objKey{}) {
			if _, ok := t.profiles[k]; ok {
				return true
			}
		}
	}
	return false
}

// endpoints resolves a target to its endpoint set.
func (c *cluster) endpoints(t Target, cfg *config) (EndpointSet, dependency) {
	if !t.IsIP() {
		set := c.serviceEndpoints(t.Service, t.Port, t.Hostname, cfg)
		return set, dependency{service: t.Service, namespace: t.Service.Namespace}
	}
	dep := dependency{ip: t.IP}
	if id, ok := c.serviceForIP(t.IP); ok {
		dep.service, dep.namespace = id, id.Namespace
		return c.serviceEndpoints(id, t.Port, "", cfg), dep
	}
	if pod := c.podForIP(t.IP, t.Port); pod != nil {
		dep.namespace = pod.Namespace
		ep := c.podEndpoint(pod, netip.AddrPortFrom(t.IP, uint16(t.Port)), "", cfg)
		return EndpointSet{Exists: true, Endpoints: []Endpoint{ep}, MetricLabels: map[string]string{"namespace": pod.Namespace}}, dep
	}
	return EndpointSet{}, dep
}

// serviceForIP finds the Service with cluster IP ip. Should several claim
// it (an API server would not allow that), the first by namespace/name
// wins.
func (c *cluster) serviceForIP(ip netip.Addr) (ServiceID, bool) {
	set := c.svcByIP[ip]
	if len(set) == 0 {
		return ServiceID{}, false
	}
	k := sortedKeys(set)[0]
	return ServiceID{Namespace: k.ns, Name: k.name}, true
}

// podForIP finds the live pod with IP ip. Pods on the host network share
// the node's IP; one of them is chosen only when it declares port.
func (c *cluster) podForIP(ip netip.Addr, port uint32) *corev1.Pod {
	var host *corev1.Pod
	for _, k := range sortedKeys(c.podsByIP[ip]) {
		p := c.pods[k]
		if p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if !p.Spec.HostNetwork {
			return p
		}
		if host == nil && declaresPort(p, port) {
			host = p
		}
	}
	return host
}

func declaresPort(p *corev1.Pod, port uint32) bool {
	for _, ctr := range p.Spec.Containers {
		for _, cp := range ctr.Ports {
			if uint32(cp.ContainerPort) == port || uint32(cp.HostPort) == port {
				return true
			}
		}
	}
	return false
}

type candidate struct {
	ep    Endpoint
	ready bool
}

// serviceEndpoints computes a service's endpoints on port from its
// EndpointSlices. Endpoints are those whose ready condition is true or
// unset; when there are none, serving endpoints that are terminating are
// used instead (as kube-proxy does), so connections drain to pods that
// still answer. An address listed by several slices appears once, ready
// over not ready, then the first slice by name. Endpoints whose pod is
// unknown are left out: without the pod there is no identity, and
// connecting in plaintext to a meshed pod would be a downgrade.
func (c *cluster) serviceEndpoints(id ServiceID, port uint32, hostname string, cfg *config) EndpointSet {
	svc := c.services[objKey{id.Namespace, id.Name}]
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return EndpointSet{}
	}
	labels := map[string]string{"namespace": id.Namespace, "service": id.Name}
	portName, portKnown := "", false
	for _, sp := range svc.Spec.Ports {
		if uint32(sp.Port) == port && (sp.Protocol == "" || sp.Protocol == corev1.ProtocolTCP) {
			portName, portKnown = sp.Name, true
			break
		}
	}
	keys := sortedKeys(c.slicesBySvc[id])
	family := preferredFamily(svc, keys, c.slices)
	byAddr := map[netip.AddrPort]int{}
	var cands []candidate
	for _, k := range keys {
		s := c.slices[k]
		if s == nil || s.AddressType != family {
			continue
		}
		target := port
		if portKnown {
			target = 0
			for _, p := range s.Ports {
				name := ""
				if p.Name != nil {
					name = *p.Name
				}
				if name == portName && p.Port != nil && (p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP) {
					target = uint32(*p.Port)
					break
				}
			}
			if target == 0 || target > 65535 {
				continue
			}
		}
		for _, e := range s.Endpoints {
			if hostname != "" && (e.Hostname == nil || *e.Hostname != hostname) {
				continue
			}
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			serving := ready
			if e.Conditions.Serving != nil {
				serving = *e.Conditions.Serving
			}
			terminating := e.Conditions.Terminating != nil && *e.Conditions.Terminating
			if !ready && !(serving && terminating) {
				continue
			}
			var pod *corev1.Pod
			if pk, ok := podRef(s.Namespace, e); ok {
				if pod = c.pods[pk]; pod == nil {
					continue
				}
			}
			zone := ""
			if e.Zone != nil {
				zone = *e.Zone
			}
			for _, raw := range e.Addresses {
				ip, err := netip.ParseAddr(raw)
				if err != nil {
					continue
				}
				addr := netip.AddrPortFrom(ip.Unmap(), uint16(target))
				if i, dup := byAddr[addr]; dup {
					if ready && !cands[i].ready {
						cands[i] = candidate{ep: c.endpointFor(pod, addr, zone, cfg), ready: true}
					}
					continue
				}
				byAddr[addr] = len(cands)
				cands = append(cands, candidate{ep: c.endpointFor(pod, addr, zone, cfg), ready: ready})
			}
		}
	}
	anyReady := false
	for _, cd := range cands {
		anyReady = anyReady || cd.ready
	}
	eps := make([]Endpoint, 0, len(cands))
	for _, cd := range cands {
		if cd.ready == anyReady {
			eps = append(eps, cd.ep)
		}
	}
	set := NewEndpointSet(labels, eps...)
	return set
}

// preferredFamily picks the address family of the slices to read: the
// service's first IP family when it has slices of it, otherwise the family
// of its first slice.
func preferredFamily(svc *corev1.Service, keys []objKey, slices map[objKey]*discoveryv1.EndpointSlice) discoveryv1.AddressType {
	want := discoveryv1.AddressTypeIPv4
	if len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		want = discoveryv1.AddressTypeIPv6
	}
	first := discoveryv1.AddressType("")
	for _, k := range keys {
		s := slices[k]
		if s == nil || (s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		if s.AddressType == want {
			return want
		}
		if first == "" {
			first = s.AddressType
		}
	}
	if first != "" {
		return first
	}
	return want
}

func (c *cluster) endpointFor(pod *corev1.Pod, addr netip.AddrPort, zone string, cfg *config) Endpoint {
	if pod == nil {
		e := Endpoint{Addr: addr, Weight: defaultEndpointWeight, Zone: zone}
		if zone != "" {
			e.MetricLabels = map[string]string{"zone": zone}
		}
		return e
	}
	return c.podEndpoint(pod, addr, zone, cfg)
}

// podInfo is what translation derives from a pod and its namespace.
type podInfo struct {
	pod      *corev1.Pod
	ns       *corev1.Namespace
	meshed   bool
	identity string
	opaque   PortSet
	skip     PortSet
	inbound  uint32
	labels   map[string]string
	byZone   map[string]map[string]string
}

func (c *cluster) podInfo(pod *corev1.Pod, cfg *config) *podInfo {
	k := objKey{pod.Namespace, pod.Name}
	ns := c.namespaces[pod.Namespace]
	if pi := c.podInfos[k]; pi != nil && pi.pod == pod && pi.ns == ns {
		return pi
	}
	pi := &podInfo{pod: pod, ns: ns, byZone: map[string]map[string]string{}}
	cpns := pod.Labels[labelControlPlaneNS]
	pi.meshed = cpns != ""
	if pi.meshed && cpns == cfg.controlPlaneNS {
		pi.identity = identityName(pod.Spec.ServiceAccountName, pod.Namespace, cpns, cfg.trustDomain)
	}
	named := containerPortNames(pod)
	var nsAnn map[string]string
	if ns != nil {
		nsAnn = ns.Annotations
	}
	opaque, _, err := ports.OpaqueForPod(pod.Annotations, nsAnn, named, declaredPorts(pod), cfg.defaultOpaque)
	if err != nil {
		cfg.logger.Warn("discovery: bad opaque-ports annotation; no port is opaque", "pod", pod.Namespace+"/"+pod.Name, "error", err)
	}
	pi.opaque = opaque
	pi.skip = c.portAnnotation(pod.Annotations, ns, annotationSkipInboundPorts, named, PortSet{}, cfg)
	pi.inbound = proxyInboundPort(pod)
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	pi.labels = map[string]string{"pod": pod.Name, "serviceaccount": sa}
	if kind, name := podOwner(pod); kind != "" {
		pi.labels[kind] = name
	}
	c.podInfos[k] = pi
	return pi
}

// portAnnotation reads a port-list annotation from the pod, then the
// namespace, then falls back to def. A value that does not parse is
// logged and skipped.
func (c *cluster) portAnnotation(podAnn map[string]string, ns *corev1.Namespace, key string, named map[string]int32, def PortSet, cfg *config) PortSet {
	sources := []map[string]string{podAnn}
	if ns != nil {
		sources = append(sources, ns.Annotations)
	}
	for _, ann := range sources {
		v, ok := ann[key]
		if !ok {
			continue
		}
		ps, err := ParsePortSet(v, named)
		if err != nil {
			cfg.logger.Warn("discovery: ignoring bad port annotation", "annotation", key, "value", v, "error", err)
			continue
		}
		return ps
	}
	return def
}

// podOwner names the workload that owns a pod for metric labels, as
// Linkerd does: the lower-case kind of the controller, with ReplicaSets of
// Deployments reported as their Deployment.
func podOwner(pod *corev1.Pod) (string, string) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", ""
	}
	kind := strings.ToLower(ref.Kind)
	if kind == "replicaset" {
		if h := pod.Labels[labelPodTemplateHash]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			return "deployment", strings.TrimSuffix(ref.Name, "-"+h)
		}
	}
	return kind, ref.Name
}

func (c *cluster) podEndpoint(pod *corev1.Pod, addr netip.AddrPort, zone string, cfg *config) Endpoint {
	pi := c.podInfo(pod, cfg)
	port := uint32(addr.Port())
	e := Endpoint{Addr: addr, Weight: defaultEndpointWeight, Zone: zone, MetricLabels: pi.labels}
	if zone != "" {
		l := pi.byZone[zone]
		if l == nil {
			l = make(map[string]string, len(pi.labels)+1)
			for k, v := range pi.labels {
				l[k] = v
			}
			l["zone"] = zone
			pi.byZone[zone] = l
		}
		e.MetricLabels = l
	}
	if !pi.meshed || pi.skip.Contains(port) {
		return e
	}
	e.Identity = pi.identity
	switch {
	case pi.opaque.Contains(port):
		e.Hint = HintOpaque
		e.OpaqueTransportPort = pi.inbound
	case cfg.h2Upgrade:
		e.Hint = HintH2
	}
	return e
}
