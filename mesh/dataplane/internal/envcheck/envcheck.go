// Package envcheck holds the syntax checks the proxy's WEFT_PROXY_*
// settings share between the packages that read them (mesh/dataplane for
// the proxy's own settings, mesh/dataplane/control for the control plane
// and the workload), so that one address or name is judged by one rule.
package envcheck

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// HostPort checks a HOST:PORT. A listen address may have an empty host
// (every interface) and port 0 (any free port), and its host must be an
// IP address or localhost; a dial address needs a host (an IP address or
// a DNS name) and a port in 1..65535.
func HostPort(s string, listen bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (n == 0 && !listen) {
		return fmt.Errorf("port %q is not in 1..65535", port)
	}
	if listen {
		if host == "" {
			return nil
		}
		if _, err := netip.ParseAddr(host); err != nil && host != "localhost" {
			return fmt.Errorf("listen host %q is not an IP address", host)
		}
		return nil
	}
	if host == "" {
		return errors.New("host is empty")
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	return DNSName(host)
}

// DNSName checks a DNS name: labels of 1..63 letters, digits, '-' or '_',
// 253 bytes at most, an optional trailing dot.
func DNSName(s string) error {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return errors.New("not a DNS name")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q is not a DNS label", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return fmt.Errorf("label %q has character %q", label, c)
			}
		}
	}
	return nil
}
