package l4

import (
	"context"
	"net"
	"net/netip"
	"sync"
)

// portSet is the live set of ports the proxy listens on. The inbound
// proxy never forwards a connection to one of them, whatever a transport
// header or an original destination says: a client that could reach the
// proxy's own listeners through its inbound port would reach the admin
// server from 127.0.0.1, or loop connections through the proxy.
type portSet struct {
	mu    sync.RWMutex
	ports map[uint16]int // port -> listeners on it
}

func (s *portSet) add(port uint16) {
	if port == 0 {
		return
	}
	s.mu.Lock()
	if s.ports == nil {
		s.ports = map[uint16]int{}
	}
	s.ports[port]++
	s.mu.Unlock()
}

func (s *portSet) remove(port uint16) {
	s.mu.Lock()
	if s.ports[port]--; s.ports[port] <= 0 {
		delete(s.ports, port)
	}
	s.mu.Unlock()
}

func (s *portSet) has(port uint16) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ports[port] > 0
}

// Own marks port as one of the proxy's own listeners' (the inbound path
// never forwards to it) until the returned function is called.
func (p *Paths) Own(port uint16) (release func()) {
	p.own.add(port)
	return sync.OnceFunc(func() { p.own.remove(port) })
}

// Dialled reports whether remote, a connection's peer address
// (host:port), is the local end of a loopback connection the proxy
// dialled itself (see connSet).
func (p *Paths) Dialled(remote string) bool { return p.self.has(remote) }

// connSet holds the local addresses of the loopback connections the proxy
// opened itself (to the application, or to an endpoint on the same host).
// The admin server refuses /shutdown from them: such a request was
// forwarded by the proxy for a client elsewhere, it was not sent by a
// process next to the proxy.
type connSet struct{ m sync.Map }

// add records c when its local address is a loopback one; the returned
// function forgets it.
func (s *connSet) add(c net.Conn) func() {
	ta, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return func() {}
	}
	a := ta.AddrPort()
	a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	if !a.Addr().IsLoopback() {
		return func() {}
	}
	s.m.Store(a, struct{}{})
	return func() { s.m.Delete(a) }
}

// has reports whether the peer address of a connection (host:port) is
// one the proxy dialled itself.
func (s *connSet) has(remote string) bool {
	a, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	_, ok := s.m.Load(netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	return ok
}

// selfConn is a connection the proxy dialled, forgotten by the set when
// it closes.
type selfConn struct {
	net.Conn
	forget func()
}

func (c *selfConn) Close() error {
	c.forget()
	return c.Conn.Close()
}

// NetConn returns the dialled connection.
func (c *selfConn) NetConn() net.Conn { return c.Conn }

// dialTracked dials addr in plaintext and records the connection among the
// proxy's own (see connSet) until it is closed.
func (p *Paths) dialTracked(ctx context.Context, addr string) (net.Conn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &selfConn{Conn: c, forget: sync.OnceFunc(p.self.add(c))}, nil
}
