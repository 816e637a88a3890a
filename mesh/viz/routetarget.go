package viz

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/weftmesh/weft/mesh/internal/dnsname"
)

// RouteTarget is what the outbound routes of a workload are shown for
// (`weft viz routes --to`): a Service, matched against the dst label of
// the route series, which the proxies set to the Service's canonical name
// ("web.shop.svc.cluster.local:8080") when discovery knows the
// destination as a Service; an address, for traffic to an address that
// is not a Service's; or an EgressNetwork, matched against the parent_*
// labels the proxies put on the route series of destinations under an
// EgressNetwork (Linkerd's labels: parent_kind="EgressNetwork",
// parent_namespace, parent_name).
type RouteTarget struct {
	// Service and Namespace name a Service; EgressNetwork and Namespace
	// an EgressNetwork (Service is then empty).
	Service, Namespace string
	EgressNetwork      string
	// Domain is the cluster domain ("cluster.local") when the target was
	// given as a fully qualified name; empty matches any.
	Domain string
	// Addr is the IP address of an address target (Service is empty).
	Addr netip.Addr
	// Port, when not 0, must match the dst label's port.
	Port uint16
}

// ErrRouteTarget is wrapped by ParseRouteTarget's errors.
var ErrRouteTarget = errors.New("viz: not a route target")

// Labels and kind of the route series of a destination under an
// EgressNetwork (docs/metrics.md).
const (
	labelParentGroup     = "parent_group"
	labelParentKind      = "parent_kind"
	labelParentNamespace = "parent_namespace"
	labelParentName      = "parent_name"
	egressNetworkKind    = "EgressNetwork"
	egressNetworkGroup   = "policy.linkerd.io"
)

// ParseRouteTarget reads a --to value: NAME, svc/NAME, service/NAME,
// services/NAME (a Service in namespace), NAME.NAMESPACE,
// NAME.NAMESPACE.svc or NAME.NAMESPACE.svc.DOMAIN (a fully qualified
// name), any of the names with :PORT, an IP address with or without
// :PORT, or egressnetwork/NAME, egressnetworks/NAME or egress/NAME (an
// EgressNetwork in namespace, optionally with :PORT). Anything else is an
// error saying what it accepts.
func ParseRouteTarget(s, namespace string) (RouteTarget, error) {
	bad := func(why string) (RouteTarget, error) {
		return RouteTarget{}, fmt.Errorf("%w: %q %s; want a Service (NAME, svc/NAME, NAME.NAMESPACE.svc.cluster.local, optionally with :PORT), egressnetwork/NAME or IP:PORT", ErrRouteTarget, s, why)
	}
	if s == "" {
		return bad("is empty")
	}
	if len(s) > 300 {
		return bad("is too long")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return bad("has port 0")
		}
		return RouteTarget{Addr: ap.Addr().Unmap(), Port: ap.Port()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return RouteTarget{Addr: a.Unmap()}, nil
	}
	name := s
	if typ, rest, ok := strings.Cut(s, "/"); ok {
		switch strings.ToLower(typ) {
		case "svc", "service", "services":
		case "egressnetwork", "egressnetworks", "egress":
			return parseEgressTarget(rest, namespace, bad)
		default:
			return bad("is not a Service or an EgressNetwork (only svc/NAME and egressnetwork/NAME name a resource here)")
		}
		if strings.Contains(rest, ".") {
			return bad("has a dot in the Service's name (svc/NAME takes the name; the namespace is -n or --to-namespace)")
		}
		name = rest
	}
	var t RouteTarget
	if host, port, ok := strings.Cut(name, ":"); ok {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad("has a port that is not a number from 1 to 65535")
		}
		name, t.Port = host, uint16(n)
	}
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(name, ".")), ".")
	for _, l := range labels {
		if !dnsname.Label(l) {
			return bad("is not a DNS name")
		}
	}
	t.Service, t.Namespace = labels[0], namespace
	switch {
	case len(labels) == 1:
		if namespace == "" {
			return bad("needs a namespace (-n or --to-namespace)")
		}
	case len(labels) == 2 || len(labels) == 3 && labels[2] == "svc":
		t.Namespace = labels[1]
	case len(labels) >= 4 && labels[2] == "svc":
		t.Namespace, t.Domain = labels[1], strings.Join(labels[3:], ".")
	default:
		return bad("is not a Service's name (NAME.NAMESPACE.svc.DOMAIN)")
	}
	return t, nil
}

// parseEgressTarget reads the NAME[:PORT] of egressnetwork/NAME. The
// name is a Kubernetes object name (a DNS subdomain: dots allowed); the
// namespace is the one given (-n or --to-namespace).
func parseEgressTarget(rest, namespace string, bad func(string) (RouteTarget, error)) (RouteTarget, error) {
	t := RouteTarget{Namespace: namespace}
	name := rest
	if host, port, ok := strings.Cut(rest, ":"); ok {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return bad("has a port that is not a number from 1 to 65535")
		}
		name, t.Port = host, uint16(n)
	}
	if name == "" || len(name) > 253 {
		return bad("has no EgressNetwork name")
	}
	for _, l := range strings.Split(name, ".") {
		if !dnsname.Label(l) {
			return bad("is not an EgressNetwork's name (a lower-case DNS name)")
		}
	}
	if namespace == "" {
		return bad("needs a namespace (-n or --to-namespace)")
	}
	t.EgressNetwork = name
	return t, nil
}

// MatchesSeries reports whether a route series (its labels) is traffic
// to this target: for a Service or an address, its dst label (Matches);
// for an EgressNetwork, its parent_* labels, and the port of its dst when
// the target has one.
func (t RouteTarget) MatchesSeries(labels map[string]string) bool {
	if t.EgressNetwork == "" {
		return t.Matches(labels["dst"])
	}
	if labels[labelParentKind] != egressNetworkKind || labels[labelParentName] != t.EgressNetwork || labels[labelParentNamespace] != t.Namespace {
		return false
	}
	if g := labels[labelParentGroup]; g != "" && g != egressNetworkGroup {
		return false
	}
	_, port := splitDst(labels["dst"])
	return t.Port == 0 || port == strconv.Itoa(int(t.Port))
}

// splitDst splits a dst label into host and port ("" when none).
func splitDst(dst string) (host, port string) {
	if i := strings.LastIndexByte(dst, ':'); i >= 0 && !strings.HasSuffix(dst, "]") {
		return dst[:i], dst[i+1:]
	}
	return dst, ""
}

// Matches reports whether a route series' dst label is this target (a
// Service or an address; an EgressNetwork target matches no dst alone,
// see MatchesSeries).
func (t RouteTarget) Matches(dst string) bool {
	if t.EgressNetwork != "" {
		return false
	}
	host, port := splitDst(dst)
	if t.Port != 0 && port != strconv.Itoa(int(t.Port)) {
		return false
	}
	if t.Addr.IsValid() {
		a, err := netip.ParseAddr(strings.Trim(host, "[]"))
		return err == nil && a.Unmap() == t.Addr
	}
	labels := strings.Split(strings.ToLower(strings.TrimSuffix(host, ".")), ".")
	if len(labels) < 4 || labels[0] != t.Service || labels[1] != t.Namespace || labels[2] != "svc" {
		return false
	}
	return t.Domain == "" || strings.Join(labels[3:], ".") == t.Domain
}

// String names the target as a user would write it.
func (t RouteTarget) String() string {
	var s string
	if t.Addr.IsValid() {
		s = t.Addr.String()
		if t.Port != 0 {
			return netip.AddrPortFrom(t.Addr, t.Port).String()
		}
		return s
	}
	kind, name := "svc/", t.Service
	if t.EgressNetwork != "" {
		kind, name = "egressnetwork/", t.EgressNetwork
	}
	s = kind + name + " in namespace " + t.Namespace
	if t.Port != 0 {
		s = kind + name + ":" + strconv.Itoa(int(t.Port)) + " in namespace " + t.Namespace
	}
	return s
}

// EgressParent returns the EgressNetwork ("NAMESPACE/NAME") whose route a
// series is, from its parent_* labels, or "" for any other series.
func EgressParent(labels map[string]string) string {
	if labels[labelParentKind] != egressNetworkKind || labels[labelParentName] == "" {
		return ""
	}
	if g := labels[labelParentGroup]; g != "" && g != egressNetworkGroup {
		return ""
	}
	return labels[labelParentNamespace] + "/" + labels[labelParentName]
}
