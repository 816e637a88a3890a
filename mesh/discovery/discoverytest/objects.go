package discoverytest

import (
	"strconv"
	"strings"

	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Namespace builds a Namespace with optional annotations given as
// key, value pairs.
func Namespace(name string, annotations ...string) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: pairs(annotations)},
	}
}

// ServicePort is a named TCP port of a Service and the port it targets.
type ServicePort struct {
	Name       string
	Port       int32
	TargetPort int32
}

// Service builds a ClusterIP Service (clusterIP "None" makes it headless).
func Service(ns, name, clusterIP string, ports ...ServicePort) *corev1.Service {
	s := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: clusterIP,
			Selector:  map[string]string{"app": name},
		},
	}
	if clusterIP != "" {
		s.Spec.ClusterIPs = []string{clusterIP}
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Port: p.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(p.TargetPort),
		})
	}
	return s
}

// ServiceWithAnnotations sets annotations (key, value pairs) on s and
// returns it.
func ServiceWithAnnotations(s *corev1.Service, kv ...string) *corev1.Service {
	s.Annotations = pairs(kv)
	return s
}

// SlicePort is a named port of an EndpointSlice.
type SlicePort struct {
	Name string
	Port int32
}

// EndpointSlice builds an IPv4 EndpointSlice of service svc.
func EndpointSlice(ns, name, svc string, ports []SlicePort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
	if strings.Contains(firstAddress(eps), ":") {
		s.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, p := range ports {
		name, port, proto := p.Name, p.Port, corev1.ProtocolTCP
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &name, Port: &port, Protocol: &proto})
	}
	return s
}

func firstAddress(eps []discoveryv1.Endpoint) string {
	for _, e := range eps {
		if len(e.Addresses) > 0 {
			return e.Addresses[0]
		}
	}
	return ""
}

// EndpointOption adjusts an endpoint built by Endpoint.
type EndpointOption func(*discoveryv1.Endpoint)

// Endpoint builds a ready endpoint at ip backed by pod (no target
// reference when pod is empty).
func Endpoint(ip, pod string, opts ...EndpointOption) discoveryv1.Endpoint {
	ready := true
	e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
	if pod != "" {
		e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
	}
	for _, o := range opts {
		o(&e)
	}
	return e
}

// NotReady marks an endpoint not ready (and not serving).
func NotReady() EndpointOption {
	return func(e *discoveryv1.Endpoint) {
		f := false
		e.Conditions.Ready, e.Conditions.Serving = &f, &f
	}
}

// Terminating marks an endpoint terminating, still serving or not; a
// terminating endpoint is never ready.
func Terminating(serving bool) EndpointOption {
	return func(e *discoveryv1.Endpoint) {
		f, t := false, true
		e.Conditions.Ready, e.Conditions.Terminating = &f, &t
		e.Conditions.Serving = &serving
	}
}

// Zone sets an endpoint's zone.
func Zone(z string) EndpointOption { return func(e *discoveryv1.Endpoint) { e.Zone = &z } }

// Hostname sets an endpoint's hostname.
func Hostname(h string) EndpointOption { return func(e *discoveryv1.Endpoint) { e.Hostname = &h } }

// PodOption adjusts a pod built by Pod.
type PodOption func(*corev1.Pod)

// Pod builds a running pod with IP ip, service account sa and one
// container.
func Pod(ns, name, ip, sa string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			Containers:         []corev1.Container{{Name: "app", Image: "app:latest"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Meshed labels a pod as injected by the control plane in namespace cpns
// and adds a proxy container listening inbound on inboundPort (0: omit
// the environment variable, so the default 4143 applies).
func Meshed(cpns string, inboundPort int) PodOption {
	return func(p *corev1.Pod) {
		p.Labels["linkerd.io/control-plane-ns"] = cpns
		c := corev1.Container{Name: "weft-proxy", Image: "weft-proxy:dev"}
		if inboundPort != 0 {
			c.Env = []corev1.EnvVar{{Name: "WEFT_PROXY_INBOUND_ADDR", Value: "0.0.0.0:" + strconv.Itoa(inboundPort)}}
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
}

// Annotations sets pod annotations given as key, value pairs.
func Annotations(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Annotations = pairs(kv) }
}

// ContainerPort declares a named port on the pod's app container.
func ContainerPort(name string, port int32) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// OwnedByDeployment makes a pod owned by ReplicaSet <deploy>-<hash>, as a
// Deployment's pods are.
func OwnedByDeployment(deploy, hash string) PodOption {
	return func(p *corev1.Pod) {
		t := true
		p.Labels["pod-template-hash"] = hash
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: deploy + "-" + hash, UID: types.UID("uid-" + deploy), Controller: &t,
		}}
	}
}

// Phase sets a pod's phase.
func Phase(ph corev1.PodPhase) PodOption { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// ServiceProfile builds a ServiceProfile named fqn in namespace ns with
// routes.
func ServiceProfile(ns, fqn string, routes ...spv1alpha2.RouteSpec) *spv1alpha2.ServiceProfile {
	return &spv1alpha2.ServiceProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: "linkerd.io/v1alpha2", Kind: "ServiceProfile"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fqn},
		Spec:       spv1alpha2.ServiceProfileSpec{Routes: routes},
	}
}

// Route builds a route matching method and pathRegex.
func Route(name, method, pathRegex string) spv1alpha2.RouteSpec {
	return spv1alpha2.RouteSpec{Name: name, Condition: &spv1alpha2.RequestMatch{Method: method, PathRegex: pathRegex}}
}

// Weight parses a resource quantity for dstOverrides weights.
func Weight(s string) resource.Quantity { return resource.MustParse(s) }

func pairs(kv []string) map[string]string {
	if len(kv) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}
