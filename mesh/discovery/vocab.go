package discovery

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
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
	defaultOpaquePortsString   = vocab.DefaultOpaquePorts
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

// PortRange is an inclusive range of TCP ports.
type PortRange struct {
	From, To uint16
}

// PortSet is a set of TCP ports kept as sorted, merged ranges. The zero
// value is empty.
type PortSet struct {
	ranges []PortRange
}

// Contains reports whether port p is in the set.
func (s PortSet) Contains(p uint32) bool {
	if p == 0 || p > 65535 {
		return false
	}
	i := sort.Search(len(s.ranges), func(i int) bool { return uint32(s.ranges[i].To) >= p })
	return i < len(s.ranges) && uint32(s.ranges[i].From) <= p
}

// Ranges returns a copy of the set's ranges, sorted and merged.
func (s PortSet) Ranges() []PortRange { return append([]PortRange(nil), s.ranges...) }

// String formats the set in the annotation syntax ("25,4000-4100").
func (s PortSet) String() string {
	parts := make([]string, 0, len(s.ranges))
	for _, r := range s.ranges {
		if r.From == r.To {
			parts = append(parts, strconv.Itoa(int(r.From)))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.From, r.To))
		}
	}
	return strings.Join(parts, ",")
}

// ParsePortSet parses the port-list syntax of the opaque-ports and
// skip-ports annotations: comma-separated port numbers ("3306"), inclusive
// ranges ("4000-4100") and, when named is not nil, names of container ports
// ("mysql"). Blank entries are ignored. A bad entry is an error naming it.
func ParsePortSet(s string, named map[string]int32) (PortSet, error) {
	var out []PortRange
	for _, raw := range strings.Split(s, ",") {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		if lo, hi, ok := strings.Cut(e, "-"); ok && isDigits(lo) {
			from, err := parsePortNumber(lo)
			if err != nil {
				return PortSet{}, fmt.Errorf("discovery: port range %q: %w", e, err)
			}
			to, err := parsePortNumber(hi)
			if err != nil {
				return PortSet{}, fmt.Errorf("discovery: port range %q: %w", e, err)
			}
			if from > to {
				return PortSet{}, fmt.Errorf("discovery: port range %q: start %d is after end %d", e, from, to)
			}
			out = append(out, PortRange{From: from, To: to})
			continue
		}
		if isDigits(e) {
			p, err := parsePortNumber(e)
			if err != nil {
				return PortSet{}, fmt.Errorf("discovery: port %q: %w", e, err)
			}
			out = append(out, PortRange{From: p, To: p})
			continue
		}
		if p, ok := named[e]; ok && p > 0 && p <= 65535 {
			out = append(out, PortRange{From: uint16(p), To: uint16(p)})
			continue
		}
		return PortSet{}, fmt.Errorf("discovery: port entry %q is not a port number, a range or a known port name", e)
	}
	return newPortSet(out), nil
}

// mustPortSet is ParsePortSet for literals known to be valid, such as
// defaults in code; it returns the empty set on error.
func mustPortSet(s string) PortSet {
	ps, err := ParsePortSet(s, nil)
	if err != nil {
		return PortSet{}
	}
	return ps
}

func newPortSet(rs []PortRange) PortSet {
	if len(rs) == 0 {
		return PortSet{}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	merged := []PortRange{rs[0]}
	for _, r := range rs[1:] {
		last := &merged[len(merged)-1]
		if uint32(r.From) <= uint32(last.To)+1 {
			if r.To > last.To {
				last.To = r.To
			}
			continue
		}
		merged = append(merged, r)
	}
	return PortSet{ranges: merged}
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parsePortNumber(s string) (uint16, error) {
	if !isDigits(s) || len(s) > 5 {
		return 0, fmt.Errorf("%q is not a port number", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%q is out of the range 1-65535", s)
	}
	return uint16(n), nil
}

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
