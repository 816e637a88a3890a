package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/detect"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/authz"
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
	conn      net.Conn // plaintext stream from the client (TLS terminated)
	peer      authz.Conn
	target    netip.Addr // the address the client connected to, when known
	port      uint16
	protocol  transport.Protocol
	fromProxy bool   // the transport header came with mesh TLS
	prefix    []byte // bytes already read from conn, to forward first
	remote    netip.AddrPort
	local     netip.Addr // the proxy's own address on the connection
	dstName   string     // the authority the peer proxy resolved (transport header)
}

// targetAddr is the address the client meant to reach: the original
// destination when the connection was redirected, otherwise the proxy's
// own address with the target port.
func (ic *inboundConn) targetAddr() netip.AddrPort {
	if ic.target.IsValid() {
		return netip.AddrPortFrom(ic.target, ic.port)
	}
	if ic.local.IsValid() {
		return netip.AddrPortFrom(ic.local, ic.port)
	}
	return netip.AddrPort{}
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
	if p.lacksRequiredIdentity(ic) {
		log.Info("inbound connection refused: the port requires a mesh identity")
		return false
	}

	st, err := p.pols.get(ctx, uint32(ic.port))
	if err == nil && ic.protocol == transport.HTTP2 && !ic.fromProxy && st.srv.Protocol == authz.ProtocolHTTP1 {
		// Cleartext HTTP/2 on a port declared HTTP/1 only is refused, not
		// forwarded (the application may not expect it).
		p.m.http.protocol.WithLabelValues(Inbound, "h2c-on-http1-port").Inc()
		log.Info("inbound HTTP/2 refused on an HTTP/1 port")
		return false
	}
	if err == nil && (ic.protocol == transport.HTTP1 || ic.protocol == transport.HTTP2) &&
		(ic.fromProxy || !opaqueServer(st.proto)) {
		// HTTP: authorized request by request (routes may admit clients
		// the server alone does not).
		conn := net.Conn(ic.conn)
		if len(ic.prefix) > 0 {
			conn = &replayConn{Conn: ic.conn, prefix: append([]byte(nil), ic.prefix...)}
		}
		release()
		info := &connInfo{direction: Inbound, port: ic.port, peer: ic.peer, target: ic.target, fromProxy: ic.fromProxy,
			remote: ic.remote, targetAddr: ic.targetAddr()}
		if ic.dstName != "" {
			info.dstName = p.m.http.inboundDst.admit(ic.dstName)
		}
		log.Debug("inbound HTTP connection", "protocol", ic.protocol.String())
		p.serveHTTP(conn, ic.protocol, info, inboundSrcLabels(info.targetAddr, ic.peer, st.srv, ic.port), func() {
			if ic.conn != c {
				ic.conn.Close()
			}
			p.untrack(c)
		})
		return true
	}

	var allowed bool
	var reason string
	var srv *authz.Server
	var authzMeta *authz.Meta
	switch {
	case err != nil:
		reason = err.Error()
	case !serverIPsAllow(st.proto, ic.target):
		srv = st.srv
		reason = fmt.Sprintf("target %s is not one of the server's addresses", ic.target)
	default:
		srv = st.srv
		res := authz.Evaluate(st.srv, ic.peer, nil)
		allowed = res.Decision != authz.Deny
		if res.Authorization != nil {
			authzMeta = &res.Authorization.Meta
		}
		reason = res.Reason.String()
	}
	target := ic.targetAddr()
	al := targetLabels(&labels{}, target)
	srvLabels(al, srv, ic.port)
	if allowed && authzMeta != nil {
		metaLabels(al, "authz", *authzMeta)
	}
	tlsAccept(al, ic.peer, false)
	p.m.authzTCP(al, allowed)
	if !allowed {
		log.Info("inbound connection denied", "reason", reason)
		return false
	}

	appAddr := net.JoinHostPort(p.cfg.InboundForwardHost, strconv.Itoa(int(ic.port)))
	app, err := p.dialApp(ctx, appAddr)
	if err != nil {
		log.Info("application unreachable", "addr", appAddr, "err", err)
		return false
	}
	if err := writeAll(app, ic.prefix); err != nil {
		app.Close()
		return false
	}
	release()
	src := p.m.opened(inboundSrcLabels(target, ic.peer, srv, ic.port))
	dst := p.m.opened(appLabels())
	log.Debug("inbound connection open", "protocol", ic.protocol.String())
	pipe(ic.conn, app, src, dst, func() {
		src.closed()
		dst.closed()
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
	ic := &inboundConn{conn: c, peer: authz.Conn{IP: remote.AddrPort().Addr().Unmap()}, remote: remote.AddrPort()}
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok {
		ic.local = la.AddrPort().Addr().Unmap()
	}

	// Where the client meant to go: the original destination of a
	// redirected connection, or nothing for a direct one.
	var origPort uint16
	if local, ok := c.LocalAddr().(*net.TCPAddr); ok {
		if od, err := p.origDst(c); err == nil && od != local.AddrPort() && od.Port() != uint16(local.Port) {
			origPort = od.Port()
			ic.target = od.Addr()
		}
	}
	deadline := time.Now().Add(p.detectTimeout(Inbound))
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
		ic.port, ic.protocol, ic.fromProxy, ic.dstName = h.Port, h.Protocol, true, h.Name
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
	st := p.pols.peek(uint32(port))
	return st != nil && opaqueServer(st.proto)
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
