package dataplane

import (
	"errors"
	"net"
	"net/netip"

	"github.com/weftmesh/weft/mesh/dataplane/internal/origdst"
)

// errNoOriginalDst means the connection was not redirected by netfilter.
var errNoOriginalDst = errors.New("dataplane: connection has no original destination")

// originalDst returns the address a redirected connection was meant for.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	ap, err := origdst.Get(c)
	if errors.Is(err, origdst.ErrNotRedirected) {
		return netip.AddrPort{}, errNoOriginalDst
	}
	if err != nil {
		return netip.AddrPort{}, errors.New("dataplane: " + err.Error())
	}
	return ap, nil
}
