//go:build !linux

package dataplane

import (
	"errors"
	"net"
	"net/netip"
)

var errNoOriginalDst = errors.New("dataplane: original destinations need Linux")

func originalDst(*net.TCPConn) (netip.AddrPort, error) { return netip.AddrPort{}, errNoOriginalDst }
