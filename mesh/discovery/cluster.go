package discovery

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// objKey names a namespaced object (ns is empty for Namespaces).
type objKey struct{ ns, name string }

func (k objKey) String() string { return k.ns + "/" + k.name }

// cluster holds the Kubernetes objects discovery reads, with the indexes
// translation needs. It is not safe for concurrent use; Index guards it.
type cluster struct {
	services    map[objKey]*corev1.Service
	slices      map[objKey]*discoveryv1.EndpointSlice
	slicesBySvc map[ServiceID]map[objKey]struct{}
	pods        map[objKey]*corev1.Pod
	podsByIP    map[netip.Addr]map[objKey]struct{}
	svcByIP     map[netip.Addr]map[objKey]struct{}
	namespaces  map[string]*corev1.Namespace
	profiles    map[objKey]*spv1alpha2.ServiceProfile
	// podSvcs counts, per pod, the endpoints of each service's slices that
	// refer to it, so a pod change reaches the services it backs.
	podSvcs map[objKey]map[ServiceID]int
	// podInfos caches what translation derives from a pod and its
	// namespace; an entry is valid while both pointers are current.
	podInfos map[objKey]*podInfo
}

func newCluster() *cluster {
	return &cluster{
		services:    map[objKey]*corev1.Service{},
		slices:      map[objKey]*discoveryv1.EndpointSlice{},
		slicesBySvc: map[ServiceID]map[objKey]struct{}{},
		pods:        map[objKey]*corev1.Pod{},
		podsByIP:    map[netip.Addr]map[objKey]struct{}{},
		svcByIP:     map[netip.Addr]map[objKey]struct{}{},
		namespaces:  map[string]*corev1.Namespace{},
		profiles:    map[objKey]*spv1alpha2.ServiceProfile{},
		podSvcs:     map[objKey]map[ServiceID]int{},
		podInfos:    map[objKey]*podInfo{},
	}
}

// touched records what a change affected, so only the topics that depend
// on it are recomputed.
type touched struct {
	all        bool
	services   map[ServiceID]struct{}
	namespaces map[string]struct{} // Namespace objects
	ips        map[netip.Addr]struct{}
	profiles   map[objKey]struct{}
}

func newTouched() *touched {
	return &touched{
		services:   map[ServiceID]struct{}{},
		namespaces: map[string]struct{}{},
		ips:        map[netip.Addr]struct{}{},
		profiles:   map[objKey]struct{}{},
	}
}

func (t *touched) empty() bool {
	return !t.all && len(t.services) == 0 && len(t.namespaces) == 0 && len(t.ips) == 0 && len(t.profiles) == 0
}

// ErrUnsupportedObject is wrapped by the error for an object of a kind
// discovery does not read.
var ErrUnsupportedObject = errors.New("unsupported object")

// kindOf names the kind of a supported object, or returns an error.
func kindOf(obj runtime.Object) (string, error) {
	switch obj.(type) {
	case *corev1.Service:
		return "Service", nil
	case *discoveryv1.EndpointSlice:
		return "EndpointSlice", nil
	case *corev1.Pod:
		return "Pod", nil
	case *corev1.Namespace:
		return "Namespace", nil
	case *spv1alpha2.ServiceProfile:
		return "ServiceProfile", nil
	}
	return "", fmt.Errorf("discovery: %w %T", ErrUnsupportedObject, obj)
}

// Supported reports whether discovery reads objects like obj (Services,
// discovery.k8s.io/v1 EndpointSlices, Pods, Namespaces, ServiceProfiles).
func Supported(obj runtime.Object) bool {
	_, err := kindOf(obj)
	return err == nil
}

// validateObject checks what the index needs of an object: a supported
// kind, a name and, for namespaced kinds, a namespace.
func validateObject(obj runtime.Object) error {
	kind, err := kindOf(obj)
	if err != nil {
		return err
	}
	m, ok := obj.(interface {
		GetName() string
		GetNamespace() string
	})
	if !ok || m.GetName() == "" {
		return fmt.Errorf("discovery: %s without a name", kind)
	}
	if kind != "Namespace" && m.GetNamespace() == "" {
		return fmt.Errorf("discovery: %s %q without a namespace", kind, m.GetName())
	}
	return nil
}

// apply stores (or, when deleted, removes) obj and records what changed.
// obj must have passed validateObject.
func (c *cluster) apply(obj runtime.Object, deleted bool, t *touched) {
	switch o := obj.(type) {
	case *corev1.Service:
		k := objKey{o.Namespace, o.Name}
		id := ServiceID{Namespace: o.Namespace, Name: o.Name}
		t.services[id] = struct{}{}
		if old := c.services[k]; old != nil {
			for _, ip := range serviceIPs(old) {
				t.ips[ip] = struct{}{}
				removeFromSet(c.svcByIP, ip, k)
			}
		}
		delete(c.services, k)
		if !deleted {
			c.services[k] = o
			for _, ip := range serviceIPs(o) {
				t.ips[ip] = struct{}{}
				addToSet(c.svcByIP, ip, k)
			}
		}
	case *discoveryv1.EndpointSlice:
		k := objKey{o.Namespace, o.Name}
		if old := c.slices[k]; old != nil {
			c.unindexSlice(k, old, t)
		}
		delete(c.slices, k)
		if !deleted {
			c.slices[k] = o
			c.indexSlice(k, o, t)
		}
	case *corev1.Pod:
		k := objKey{o.Namespace, o.Name}
		if old := c.pods[k]; old != nil {
			for _, ip := range podIPs(old) {
				t.ips[ip] = struct{}{}
				removeFromSet(c.podsByIP, ip, k)
			}
		}
		delete(c.pods, k)
		delete(c.podInfos, k)
		if !deleted {
			c.pods[k] = o
			for _, ip := range podIPs(o) {
				t.ips[ip] = struct{}{}
				addToSet(c.podsByIP, ip, k)
			}
		}
		for id := range c.podSvcs[k] {
			t.services[id] = struct{}{}
		}
	case *corev1.Namespace:
		t.namespaces[o.Name] = struct{}{}
		delete(c.namespaces, o.Name)
		if !deleted {
			c.namespaces[o.Name] = o
		}
	case *spv1alpha2.ServiceProfile:
		k := objKey{o.Namespace, o.Name}
		t.profiles[k] = struct{}{}
		delete(c.profiles, k)
		if !deleted {
			c.profiles[k] = o
		}
	}
}

func sliceService(s *discoveryv1.EndpointSlice) (ServiceID, bool) {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ServiceID{}, false
	}
	return ServiceID{Namespace: s.Namespace, Name: name}, true
}

func (c *cluster) indexSlice(k objKey, s *discoveryv1.EndpointSlice, t *touched) {
	id, ok := sliceService(s)
	if !ok {
		return
	}
	t.services[id] = struct{}{}
	if c.slicesBySvc[id] == nil {
		c.slicesBySvc[id] = map[objKey]struct{}{}
	}
	c.slicesBySvc[id][k] = struct{}{}
	for _, ep := range s.Endpoints {
		if pk, ok := podRef(s.Namespace, ep); ok {
			if c.podSvcs[pk] == nil {
				c.podSvcs[pk] = map[ServiceID]int{}
			}
			c.podSvcs[pk][id]++
		}
	}
}

func (c *cluster) unindexSlice(k objKey, s *discoveryv1.EndpointSlice, t *touched) {
	id, ok := sliceService(s)
	if !ok {
		return
	}
	t.services[id] = struct{}{}
	if set := c.slicesBySvc[id]; set != nil {
		delete(set, k)
		if len(set) == 0 {
			delete(c.slicesBySvc, id)
		}
	}
	for _, ep := range s.Endpoints {
		if pk, ok := podRef(s.Namespace, ep); ok {
			if m := c.podSvcs[pk]; m != nil {
				if m[id]--; m[id] <= 0 {
					delete(m, id)
				}
				if len(m) == 0 {
					delete(c.podSvcs, pk)
				}
			}
		}
	}
}

func podRef(sliceNS string, ep discoveryv1.Endpoint) (objKey, bool) {
	r := ep.TargetRef
	if r == nil || r.Kind != "Pod" || r.Name == "" {
		return objKey{}, false
	}
	ns := r.Namespace
	if ns == "" {
		ns = sliceNS
	}
	return objKey{ns, r.Name}, true
}

func addToSet[K comparable](m map[K]map[objKey]struct{}, k K, v objKey) {
	if m[k] == nil {
		m[k] = map[objKey]struct{}{}
	}
	m[k][v] = struct{}{}
}

func removeFromSet[K comparable](m map[K]map[objKey]struct{}, k K, v objKey) {
	if set := m[k]; set != nil {
		delete(set, v)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

func sortedKeys(set map[objKey]struct{}) []objKey {
	out := make([]objKey, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b objKey) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
	})
	return out
}

func serviceIPs(s *corev1.Service) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, raw := range append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...) {
		if raw == "" || strings.EqualFold(raw, corev1.ClusterIPNone) {
			continue
		}
		if ip, err := netip.ParseAddr(raw); err == nil && !seen[ip.Unmap()] {
			seen[ip.Unmap()] = true
			out = append(out, ip.Unmap())
		}
	}
	return out
}

func podIPs(p *corev1.Pod) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	raws := []string{p.Status.PodIP}
	for _, ip := range p.Status.PodIPs {
		raws = append(raws, ip.IP)
	}
	for _, raw := range raws {
		if raw == "" {
			continue
		}
		if ip, err := netip.ParseAddr(raw); err == nil && !seen[ip.Unmap()] {
			seen[ip.Unmap()] = true
			out = append(out, ip.Unmap())
		}
	}
	return out
}
