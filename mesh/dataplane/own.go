package dataplane

import (
	"net"
	"strconv"
)

// listenerPort is the TCP port l listens on, or 0.
func listenerPort(l net.Listener) uint16 {
	if ta, ok := l.Addr().(*net.TCPAddr); ok {
		return uint16(ta.Port)
	}
	return 0
}

// configuredPort is the port of a listen address from the configuration,
// or 0.
func configuredPort(addr string) uint16 {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0
	}
	return uint16(n)
}

// Own marks l as one of the proxy's own listeners until l is closed: the
// inbound proxy never forwards a connection to its port, whatever a
// transport header or a connection's original destination says. Run does
// this for every listener it serves (inbound, outbound, CONNECT, mapped,
// admin and tap), and New for every port the configuration names; call Own
// for anything a program binds beside the proxy (a debug server, say) and
// serve the listener it returns.
func (p *Proxy) Own(l net.Listener) net.Listener {
	port := listenerPort(l)
	if port == 0 {
		return l
	}
	return &ownedListener{Listener: l, release: p.paths.Own(port)}
}

type ownedListener struct {
	net.Listener
	release func()
}

func (l *ownedListener) Close() error {
	l.release()
	return l.Listener.Close()
}
