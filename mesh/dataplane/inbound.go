package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/authz"
	"github.com/weftmesh/weft/mesh/dataplane/detect"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// sniff reads the first bytes of c into buf until detect.Classify gives a
// final answer (and, for TLS when wantSNI is set, until the ClientHello is
// complete), buf is full, or deadline passes. A silent or slow client is
// opaque once the deadline passes. It returns the bytes read.
func sniff(c net.Conn, buf []byte, deadline time.Time, wantSNI bool) (int, detect.Protocol, string, error) {
	_ = c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		proto := detect.Classify(buf[:n])
		if proto == detect.TLS && wantSNI {
			sni, herr := detect.ClientHelloSNI(buf[:n])
			if herr == nil {
				return n, detect.TLS, sni, nil
			}
			if !errors.Is(herr, detect.ErrIncomplete) {
				return n, detect.Opaque, "", nil
			}
		} else if proto != detect.Unknown {
			return n, proto, "", nil
		}
		if err != nil {
			if isTimeout(err) || n > 0 {
				return n, detect.Opaque, "", nil
			}
			return n, detect.Opaque, "", err
		}
	}
	return n, detect.Opaque, "", nil
}

// replayConn returns a prefix before reading on from its connection.
type replayConn struct {
	net.Conn
	prefix []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// inboundConn is what the inbound proxy learned about a connection.
type inboundConn struct {
	conn     net.Conn // plaintext stream from the client (TLS terminated)
	peer     authz.Peer
	port     uint16
	protocol transport.Protocol
	prefix   []byte // bytes already read from conn, to forward first
}

func (p *Proxy) handleInbound(ctx context.Context, c net.Conn) bool {
	log := p.log.With("direction", Inbound, "client", c.RemoteAddr().String())
	ic, release, err := p.acceptInbound(c)
	defer release()
	if err != nil {
		log.Debug("inbound connection refused", "err", err)
		return false
	}
	log = log.With("port", ic.port, "peer_id", ic.peer.Identity, "tls", ic.peer.TLS)

	srv, err := p.pols.get(ctx, uint32(ic.port))
	var d authz.Decision
	if err != nil {
		d = authz.Decision{Index: -1, Reason: err.Error()}
	} else {
		d = authz.Evaluate(srv, ic.peer)
	}
	p.m.authz(ic.port, d.Allowed, d.Name, ic.peer.Identity, ic.peer.TLS)
	if !d.Allowed {
		log.Info("inbound connection denied", "reason", d.Reason)
		return false
	}

	appAddr := net.JoinHostPort(p.cfg.InboundForwardHost, strconv.Itoa(int(ic.port)))
	app, err := p.dialer.DialContext(ctx, "tcp", appAddr)
	if err != nil {
		log.Info("application unreachable", "addr", appAddr, "err", err)
		return false
	}
	if err := writeAll(app, ic.prefix); err != nil {
		app.Close()
		return false
	}
	release()
	stats := p.m.opened(Inbound, ic.peer.Identity, ic.peer.TLS)
	log.Debug("inbound connection open", "authz", d.Name, "protocol", ic.protocol.String())
	pipe(ic.conn, app, stats, func() {
		stats.closed()
		p.untrack(c)
	})
	return true
}

// acceptInbound sniffs the connection, terminates mesh TLS when the client
// asks for this proxy's identity, and finds the target port. The returned
// release gives back the sniffing buffer (the prefix points into it).
func (p *Proxy) acceptInbound(c net.Conn) (*inboundConn, func(), error) {
	nop := func() {}
	remote, _ := c.RemoteAddr().(*net.TCPAddr)
	if remote == nil {
		return nil, nop, errors.New("dataplane: not a TCP connection")
	}
	ic := &inboundConn{conn: c, peer: authz.Peer{Addr: remote.AddrPort().Addr().Unmap()}}

	// Where the client meant to go: the original destination of a
	// redirected connection, or nothing for a direct one.
	var origPort uint16
	if local, ok := c.LocalAddr().(*net.TCPAddr); ok {
		if od, err := p.origDst(c); err == nil && od != local.AddrPort() && od.Port() != uint16(local.Port) {
			origPort = od.Port()
			ic.peer.Target = od.Addr()
		}
	}
	deadline := time.Now().Add(p.cfg.DetectTimeout)
	if origPort != 0 && p.isOpaquePort(origPort) {
		// Opaque ports skip detection; meshed clients reach them through
		// the proxy's own port with the transport header.
		ic.port, ic.protocol = origPort, transport.Opaque
		return ic, nop, p.checkPort(ic.port)
	}

	buf := getBuf()
	release := func() {
		if buf != nil {
			putBuf(buf)
			buf = nil
		}
	}
	n, proto, sni, err := sniff(c, *buf, deadline, true)
	if err != nil {
		return nil, release, err
	}
	if proto != detect.TLS || !strings.EqualFold(sni, p.id.Name()) {
		// Not for us: plaintext (or the application's own TLS) from a
		// client without mesh identity.
		if origPort == 0 {
			return nil, release, errors.New("dataplane: direct connection without mesh TLS")
		}
		ic.port, ic.protocol, ic.prefix = origPort, protocolOf(proto), (*buf)[:n]
		return ic, release, p.checkPort(ic.port)
	}

	// Mesh TLS: replay the ClientHello into the TLS server.
	hello := append([]byte(nil), (*buf)[:n]...)
	release()
	tc := tls.Server(&replayConn{Conn: c, prefix: hello}, p.serverTLS)
	hctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, nop, err
	}
	cs := tc.ConnectionState()
	ic.conn = tc
	ic.peer.TLS = true
	ic.peer.Identity = PeerIdentity(cs)
	if cs.NegotiatedProtocol == transport.ALPN {
		_ = tc.SetReadDeadline(deadline)
		h, err := transport.Read(tc)
		_ = tc.SetReadDeadline(time.Time{})
		if err != nil {
			return nil, nop, err
		}
		ic.port, ic.protocol = h.Port, h.Protocol
		return ic, nop, p.checkPort(ic.port)
	}
	if origPort == 0 {
		return nil, nop, errors.New("dataplane: mesh TLS without transport header on a direct connection")
	}
	ic.port = origPort
	if p.isOpaquePort(origPort) {
		return ic, nop, p.checkPort(ic.port)
	}
	buf = getBuf()
	n, proto, _, err = sniff(tc, *buf, deadline, false)
	if err != nil {
		return nil, release, err
	}
	ic.protocol, ic.prefix = protocolOf(proto), (*buf)[:n]
	return ic, release, p.checkPort(ic.port)
}

// checkPort refuses ports the inbound proxy must never forward to.
func (p *Proxy) checkPort(port uint16) error {
	switch {
	case port == 0:
		return errors.New("dataplane: no target port")
	case p.cfg.InboundSkipPorts.Contains(port):
		return errors.New("dataplane: target port is a skip port")
	case p.ownPorts[port]:
		return errors.New("dataplane: target port is one of the proxy's own")
	}
	return nil
}

// isOpaquePort reports whether inbound connections to port skip detection:
// configured as opaque, or its current policy says so.
func (p *Proxy) isOpaquePort(port uint16) bool {
	if p.cfg.InboundOpaquePorts.Contains(port) {
		return true
	}
	if p.policies == nil {
		return false
	}
	p.pols.mu.Lock()
	pp := p.pols.m[uint32(port)]
	p.pols.mu.Unlock()
	if pp == nil {
		return false
	}
	return opaqueServer(pp.srv.Load())
}

func opaqueServer(s *inbound.Server) bool {
	proto := s.GetProtocol()
	return proto.GetOpaque() != nil || proto.GetTls() != nil
}

func protocolOf(p detect.Protocol) transport.Protocol {
	switch p {
	case detect.HTTP1:
		return transport.HTTP1
	case detect.HTTP2:
		return transport.HTTP2
	}
	return transport.Opaque
}
