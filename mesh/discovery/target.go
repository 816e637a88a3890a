package discovery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidTarget is wrapped by every error about a malformed destination
// path. The Destination server answers it with InvalidArgument.
var ErrInvalidTarget = errors.New("invalid destination")

// maxPathLen bounds a destination path: a DNS name (253) plus a port.
const maxPathLen = 253 + 6

// DefaultPort is the port of a destination path that names none, as in
// Linkerd.
const DefaultPort = 80

// Target is a parsed destination path: either a service name (optionally
// with the hostname of one of its pods, as StatefulSets give them) or an IP
// address, with a port.
type Target struct {
	// Service is set for names of the form <svc>.<ns>.svc.<cluster-domain>.
	Service ServiceID
	// Hostname is set for <hostname>.<svc>.<ns>.svc.<cluster-domain>: the
	// target is the one endpoint of the service with that hostname.
	Hostname string
	// IP is set for IP paths: a Service cluster IP or a pod IP.
	IP netip.Addr
	// Port is the destination port (DefaultPort when the path had none).
	Port uint32
}

// IsIP reports whether the target is an IP address rather than a name.
func (t Target) IsIP() bool { return t.IP.IsValid() }

// String formats the target in canonical form: lower-case name or
// unmapped IP, and always a port.
func (t Target) String() string {
	port := strconv.FormatUint(uint64(t.Port), 10)
	if t.IsIP() {
		return net.JoinHostPort(t.IP.String(), port)
	}
	host := t.Service.Name + "." + t.Service.Namespace
	if t.Hostname != "" {
		host = t.Hostname + "." + host
	}
	return host + ":" + port
}

// FQDN returns the service's fully qualified name in clusterDomain, such
// as web.shop.svc.cluster.local, or "" for an IP target.
func (t Target) FQDN(clusterDomain string) string {
	if t.IsIP() {
		return ""
	}
	return serviceFQDN(t.Service, clusterDomain)
}

func serviceFQDN(id ServiceID, clusterDomain string) string {
	return id.Name + "." + id.Namespace + ".svc." + clusterDomain
}

// ParseTarget parses a destination path as proxies send it in
// GetDestination.path: <svc>.<ns>.svc.<cluster-domain>[:port],
// <hostname>.<svc>.<ns>.svc.<cluster-domain>[:port], <ipv4>[:port] or
// [<ipv6>][:port]. Names are case-insensitive and may end with a dot. A
// missing port means DefaultPort. Anything else, including names outside
// the cluster domain, is an error wrapping ErrInvalidTarget that says what
// is wrong.
func ParseTarget(path, clusterDomain string) (Target, error) {
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, fmt.Errorf("discovery: %w %q: %s", ErrInvalidTarget, truncate(path, 80), fmt.Sprintf(format, args...))
	}
	if path == "" {
		return bad("empty path")
	}
	if len(path) > maxPathLen {
		return bad("longer than %d bytes", maxPathLen)
	}
	host, port := path, uint32(DefaultPort)
	if strings.HasPrefix(path, "[") || strings.Count(path, ":") == 1 {
		h, p, err := net.SplitHostPort(path)
		if err != nil {
			return bad("cannot split host and port")
		}
		n, err := parsePortNumber(p)
		if err != nil {
			return bad("port: %v", err)
		}
		host, port = h, uint32(n)
	} else if strings.Contains(path, ":") {
		return bad("an IPv6 address must be in brackets with a port, as [fd00::1]:80")
	}
	if host == "" {
		return bad("empty host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return bad("IP zones are not allowed")
		}
		return Target{IP: ip.Unmap(), Port: port}, nil
	}
	if strings.HasPrefix(path, "[") {
		return bad("%q in brackets is not an IPv6 address", host)
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if errs := validation.IsDNS1123Label(l); len(errs) > 0 {
			return bad("label %q: %s", truncate(l, 70), errs[0])
		}
	}
	suffix := append([]string{"svc"}, strings.Split(strings.ToLower(clusterDomain), ".")...)
	if len(labels) < len(suffix) || strings.Join(labels[len(labels)-len(suffix):], ".") != strings.Join(suffix, ".") {
		return bad("not a service name in cluster domain %q (want <service>.<namespace>.svc.%s)", clusterDomain, clusterDomain)
	}
	switch len(labels) - len(suffix) {
	case 2:
		return Target{Service: ServiceID{Name: labels[0], Namespace: labels[1]}, Port: port}, nil
	case 3:
		return Target{Hostname: labels[0], Service: ServiceID{Name: labels[1], Namespace: labels[2]}, Port: port}, nil
	default:
		return bad("want <service>.<namespace>.svc.%s or <hostname>.<service>.<namespace>.svc.%s", clusterDomain, clusterDomain)
	}
}

// validateClusterDomain checks a configured cluster domain.
func validateClusterDomain(d string) error {
	if d == "" {
		return errors.New("discovery: cluster domain is empty")
	}
	if errs := validation.IsDNS1123Subdomain(d); len(errs) > 0 {
		return fmt.Errorf("discovery: cluster domain %q: %s", d, errs[0])
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
