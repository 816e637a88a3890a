//go:build !linux

package origdst

import (
	"net"
	"net/netip"
)

// Get always fails: original destinations need Linux's netfilter.
func Get(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, ErrNotRedirected }
