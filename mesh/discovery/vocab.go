package discovery

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/ports"
)

// Keys and defaults read from Kubernetes objects. mesh/inject owns this
// vocabulary (it writes these keys when it injects a pod) and mesh/identity
// owns the name format; discovery imports both.
const (
	labelControlPlaneNS        = vocab.LabelControlPlaneNamespace
	annotationOpaquePorts      = vocab.AnnotationOpaquePorts
	annotationSkipInboundPorts = vocab.AnnotationSkipInboundPorts
	proxyContainerName         = vocab.ProxyContainerName
	envProxyInboundAddr        = vocab.EnvInboundAddr
	defaultProxyInboundPort    = vocab.DefaultInboundPort
	defaultControlPlaneNS      = vocab.DefaultControlPlaneNamespace
	defaultTrustDomain         = identity.DefaultTrustDomain
	// Linkerd-injected pods are understood too.
	linkerdProxyContainer = "linkerd-proxy"
	envLinkerdInboundAddr = "LINKERD2_PROXY_INBOUND_LISTEN_ADDR"
	labelPodTemplateHash  = "pod-template-hash"
	defaultEndpointWeight = 10000
	defaultClusterDomain  = "cluster.local"
)

// identityName formats the TLS identity of a meshed workload with
// mesh/identity's Name (a pod without a service account runs as "default").
func identityName(serviceAccount, namespace, controlPlaneNS, trustDomain string) string {
	if serviceAccount == "" {
		serviceAccount = "default"
	}
	return identity.Name{
		ServiceAccount: serviceAccount,
		Namespace:      namespace,
		Domain:         identity.Domain{ControlPlaneNamespace: controlPlaneNS, TrustDomain: trustDomain},
	}.String()
}

// PortRange and PortSet are mesh/ports' types: one port-list syntax and one
// opaque-ports rule for discovery and policy.
type (
	PortRange = ports.Range
	PortSet   = ports.Set
)

// ParsePortSet parses the port-list syntax of the opaque-ports and
// skip-ports annotations (see ports.Parse).
func ParsePortSet(s string, named map[string]int32) (PortSet, error) { return ports.Parse(s, named) }

// containerPortNames maps the names of a pod's container ports to numbers,
// for annotations that name ports.
func containerPortNames(pod *corev1.Pod) map[string]int32 {
	named := map[string]int32{}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.Name != "" {
					named[p.Name] = p.ContainerPort
				}
			}
		}
	}
	return named
}

// declaredPorts lists the container ports of a pod's containers and init
// containers: the ports the default opaque list is filtered by.
func declaredPorts(pod *corev1.Pod) []uint16 {
	var out []uint16
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			for _, p := range c.Ports {
				if p.ContainerPort > 0 && p.ContainerPort <= 65535 {
					out = append(out, uint16(p.ContainerPort))
				}
			}
		}
	}
	return out
}

// proxyInboundPort finds the inbound port of a pod's proxy from its
// container environment, falling back to the default 4143.
func proxyInboundPort(pod *corev1.Pod) uint32 {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range list {
			if c.Name != proxyContainerName && c.Name != linkerdProxyContainer {
				continue
			}
			for _, e := range c.Env {
				if e.Name != envProxyInboundAddr && e.Name != envLinkerdInboundAddr {
					continue
				}
				if ap, err := netip.ParseAddrPort(e.Value); err == nil && ap.Port() != 0 {
					return uint32(ap.Port())
				}
				if i := strings.LastIndexByte(e.Value, ':'); i >= 0 {
					if p, err := parsePortNumber(e.Value[i+1:]); err == nil {
						return uint32(p)
					}
				}
			}
		}
	}
	return defaultProxyInboundPort
}

// parsePortNumber reads a decimal port number, 1-65535.
func parsePortNumber(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is out of the range 1-65535", s)
	}
	return uint16(n), nil
}
