package origdst

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST (and IP6T_SO_ORIGINAL_DST), from
// linux/netfilter_ipv4.h and linux/netfilter_ipv6/ip6_tables.h.
const soOriginalDst = 80

// Get returns the address a redirected connection was meant for, or an
// error wrapping ErrNotRedirected.
func Get(c *net.TCPConn) (netip.AddrPort, error) {
	local, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, ErrNotRedirected
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var out netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if local.IP.To4() != nil {
			var sa unix.RawSockaddrInet4
			l := uint32(unsafe.Sizeof(sa))
			_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_IP, soOriginalDst,
				uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&l)), 0)
			if e != 0 {
				serr = e
				return
			}
			port := uint16(sa.Port>>8) | uint16(sa.Port<<8)
			out = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
			return
		}
		var sa unix.RawSockaddrInet6
		l := uint32(unsafe.Sizeof(sa))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_IPV6, soOriginalDst,
			uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			serr = e
			return
		}
		port := uint16(sa.Port>>8) | uint16(sa.Port<<8)
		out = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		if errors.Is(serr, unix.ENOENT) {
			return netip.AddrPort{}, ErrNotRedirected
		}
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", serr)
	}
	return out, nil
}
