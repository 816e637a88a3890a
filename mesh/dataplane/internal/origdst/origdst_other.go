//go:build !linux

package origdst

import (
	"fmt"
	"net"
	"net/netip"
)

var errNeedsLinux = fmt.Errorf("%w: original destinations need Linux's netfilter", ErrNotRedirected)

// Get always fails: original destinations need Linux's netfilter.
func Get(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, errNeedsLinux }
