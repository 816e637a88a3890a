package l4

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/detect"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// sniff reads the first bytes of c into buf until detect.Classify gives a
// final answer (and, for TLS when wantSNI is set, until the ClientHello is
// complete), buf is full, or deadline passes. It returns the bytes read
// and the protocol, which is detect.Unknown when the deadline passed (or
// the client stopped sending) before an answer: nothing at all when n is
// 0, else the beginning of what could still be HTTP. A ClientHello left
// incomplete is opaque (the application's own TLS). The error is set only
// when the client closed or failed before sending anything.
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
			switch {
			case n == 0 && !relay.IsTimeout(err):
				return 0, detect.Unknown, "", err
			case proto == detect.TLS:
				return n, detect.Opaque, "", nil
			}
			return n, detect.Unknown, "", nil
		}
	}
	return n, detect.Opaque, "", nil
}

// replayConn returns a prefix before reading on from its connection.
type replayConn struct {
	net.Conn
	prefix []byte
}

// NetConn returns the connection replayConn wraps.
func (c *replayConn) NetConn() net.Conn { return c.Conn }

// Replayed returns the connection replayConn wraps once every replayed
// byte was read, nil before: the relay reads the socket directly then.
func (c *replayConn) Replayed() net.Conn {
	if len(c.prefix) == 0 {
		return c.Conn
	}
	return nil
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		if len(c.prefix) == 0 {
			// An empty tail still holds the whole array (a ClientHello
			// with a hybrid key share is 1.5 KiB) for the life of the
			// connection.
			c.prefix = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// Reasons an inbound or outbound connection is refused before any policy
// applies (the reason label of tcp_refused_total; the admin server's are
// dataplane's, tap's internal/tap's).
const (
	refuseNoIdentity   = "no-client-identity"    // a transport header without a verified client identity
	refuseOwnPort      = "own-port"              // the target is one of the proxy's own listeners
	refuseSkipPort     = "skip-port"             // the target is an inbound skip port
	refuseNoTarget     = "no-target"             // direct connection without mesh TLS, or no port
	refuseHandshake    = "tls-handshake"         // mesh TLS failed
	refuseHeader       = "transport-header"      // unreadable transport header
	refuseSilent       = "silent"                // nothing sent before the detect timeout
	refuseIncomplete   = "incomplete-request"    // the start of an HTTP request, unfinished at the detect timeout
	refuseNotHTTP      = "not-http"              // bytes that are not HTTP on a port whose Server declares HTTP
	refuseOpaqueRoutes = "opaque-on-http-routes" // opaque bytes on a detect port with routes, no server-level authorization admitting them
	refuseNotAppPort   = "not-app-port"          // the target is not one of Config.InboundPorts, with InboundPortsOnly
)

// refusal is a connection the proxy will not serve, with the reason it
// counts.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string {
	return "dataplane: connection refused (" + r.reason + "): " + r.err.Error()
}
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason string, err error) error { return &refusal{reason: reason, err: err} }

// inboundConn is what the inbound proxy learned about a connection.
type inboundConn struct {
	conn      net.Conn // plaintext stream from the client (TLS terminated)
	peer      authz.Conn
	target    netip.Addr // the address the client connected to, when known
	port      uint16
	protocol  transport.Protocol
	fromProxy bool // the transport header came with mesh TLS and a verified client identity
	remote    netip.AddrPort
	local     netip.Addr // the proxy's own address on the connection
	dstName   string     // the authority the peer proxy resolved (transport header)

	// What protocol detection saw: whether it ran, how many bytes it read
	// and what it decided (detect.Unknown: nothing, or an unfinished HTTP
	// request, when the detect timeout passed).
	sniffed  bool
	sniffN   int
	detected detect.Protocol
	prefix   []byte  // bytes already read from conn, to forward first (points into buf)
	buf      *[]byte // the pooled sniffing buffer, given back by release
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

// release gives back the sniffing buffer (the prefix points into it).
func (ic *inboundConn) release() {
	if ic != nil && ic.buf != nil {
		relay.PutBuf(ic.buf)
		ic.buf, ic.prefix = nil, nil
	}
}

// sniff runs protocol detection on the (plaintext) client stream.
func (ic *inboundConn) sniff(deadline time.Time) error {
	ic.release()
	ic.buf = relay.GetBuf()
	n, proto, _, err := sniff(ic.conn, *ic.buf, deadline, false)
	if err != nil {
		return err
	}
	ic.sniffed, ic.sniffN, ic.detected = true, n, proto
	ic.protocol, ic.prefix = protocolOf(proto), (*ic.buf)[:n]
	return nil
}

// undecided reports a detection that ended without an answer: refused
// (silent, or an unfinished HTTP request), never forwarded as opaque.
func (ic *inboundConn) undecided() (string, bool) {
	if !ic.sniffed || ic.detected != detect.Unknown {
		return "", false
	}
	if ic.sniffN == 0 {
		return refuseSilent, true
	}
	return refuseIncomplete, true
}

func (p *Paths) handleInbound(ctx context.Context, c net.Conn) bool {
	log := p.log.With("direction", Inbound, "client", c.RemoteAddr().String())
	ic, err := p.acceptInbound(ctx, c)
	defer ic.release()
	if err != nil {
		var rf *refusal
		if errors.As(err, &rf) {
			p.m.Refuse(Inbound, rf.reason)
		}
		log.Debug("inbound connection refused", "err", err)
		return false
	}
	log = log.With("port", ic.port, "peer_id", ic.peer.Identity, "tls", ic.peer.TLS)
	if p.lacksRequiredIdentity(ic) {
		log.Info("inbound connection refused: the port requires a mesh identity")
		return false
	}

	st, err := p.state.Ports().Get(ctx, uint32(ic.port))
	if err == nil && isHTTPProtocol(st.Srv.Protocol) && !p.httpOnly(ic, log) {
		return false
	}
	if err == nil && ic.protocol == transport.HTTP2 && !ic.fromProxy && st.Srv.Protocol == authz.ProtocolHTTP1 {
		// Cleartext HTTP/2 on a port declared HTTP/1 only is refused, not
		// forwarded (the application may not expect it).
		p.m.HTTP.Protocol.WithLabelValues(Inbound, "h2c-on-http1-port").Inc()
		log.Info("inbound HTTP/2 refused on an HTTP/1 port")
		return false
	}
	if err == nil && (ic.protocol == transport.HTTP1 || ic.protocol == transport.HTTP2) &&
		(ic.fromProxy || !opaqueServer(st.Proto)) {
		// HTTP: authorized request by request (routes may admit clients
		// the server alone does not).
		conn := net.Conn(ic.conn)
		if len(ic.prefix) > 0 {
			conn = &replayConn{Conn: ic.conn, prefix: append([]byte(nil), ic.prefix...)}
		}
		ic.release()
		info := &connInfo{direction: Inbound, Conn: inboundhttp.Conn{
			Conn: httpcore.Conn{Remote: ic.remote, TargetAddr: ic.targetAddr()},
			Port: ic.port, Peer: ic.peer, Target: ic.target, FromProxy: ic.fromProxy,
			// The name is a question to discovery (profileRoute), never a
			// label by itself.
			DstName: ic.dstName,
		}}
		log.Debug("inbound HTTP connection", "protocol", ic.protocol.String())
		p.serveHTTP(conn, ic.protocol, info, connmetrics.InboundSrc(info.TargetAddr, ic.peer, st.Srv, ic.port), func() {
			if ic.conn != c {
				ic.conn.Close()
			}
			p.untrack(c)
		})
		return true
	}

	// Opaque from here on. Detection that ended without an answer is
	// refused: a silent client is not worth an application connection, and
	// the start of an HTTP request must not become opaque bytes.
	if reason, ok := ic.undecided(); ok {
		p.m.Refuse(Inbound, reason)
		log.Debug("inbound connection refused at the detect timeout", "reason", reason, "bytes", ic.sniffN)
		return false
	}
	var allowed bool
	var reason string
	var srv *authz.Server
	var authzMeta *authz.Meta
	switch {
	case err != nil:
		reason = err.Error()
	case !inboundhttp.ServerIPsAllow(st.Proto, ic.target):
		srv = st.Srv
		reason = fmt.Sprintf("target %s is not one of the server's addresses", ic.target)
	default:
		srv = st.Srv
		// Only the server's own authorizations admit opaque bytes; a
		// route's authorizations apply to the requests of that route.
		res := authz.Evaluate(st.Srv, ic.peer, nil)
		allowed = res.Decision != authz.Deny
		if res.Authorization != nil {
			authzMeta = &res.Authorization.Meta
		}
		reason = res.Reason.String()
	}
	target := ic.targetAddr()
	al := metricstore.Target(&metricstore.Labels{}, target)
	metricstore.Server(al, srv, ic.port)
	if allowed && authzMeta != nil {
		metricstore.Meta(al, "authz", *authzMeta)
	}
	metricstore.TLSAccept(al, ic.peer, false)
	p.m.AuthzTCP(al, allowed)
	if !allowed {
		if err == nil && hasHTTPRoutes(st.Srv) {
			p.m.Refuse(Inbound, refuseOpaqueRoutes)
		}
		log.Info("inbound connection denied", "reason", reason)
		return false
	}

	appAddr := net.JoinHostPort(p.cfg.InboundForwardHost, strconv.Itoa(int(ic.port)))
	app, err := p.dialApp(ctx, appAddr)
	if err != nil {
		log.Info("application unreachable", "addr", appAddr, "err", err)
		return false
	}
	forget := p.self.add(app)
	if err := writeAll(app, ic.prefix); err != nil {
		forget()
		app.Close()
		return false
	}
	ic.release()
	src := p.m.Opened(connmetrics.InboundSrc(target, ic.peer, srv, ic.port))
	dst := p.m.Opened(connmetrics.App())
	log.Debug("inbound connection open", "protocol", ic.protocol.String())
	p.pipe(c, ic.conn, app, src, dst, func() {
		forget()
		src.Closed()
		dst.Closed()
		p.untrack(c)
	})
	return true
}

// httpOnly applies the rule of ports whose Server declares HTTP/1, HTTP/2
// or gRPC: only HTTP is served there. A connection the proxy has not
// classified yet (an opaque transport header, a port configured as
// opaque) is classified now; bytes that are not HTTP are answered 400 and
// the connection closed; a client silent or unfinished at the detect
// timeout is closed. Nothing is ever forwarded as opaque bytes. It
// reports whether the connection goes on as HTTP.
func (p *Paths) httpOnly(ic *inboundConn, log *slog.Logger) bool {
	if !ic.sniffed && ic.protocol == transport.Opaque {
		if err := ic.sniff(time.Now().Add(p.detectTimeout(Inbound))); err != nil {
			return false
		}
	}
	if ic.protocol == transport.HTTP1 || ic.protocol == transport.HTTP2 {
		return true
	}
	if reason, ok := ic.undecided(); ok {
		p.m.Refuse(Inbound, reason)
		log.Debug("inbound connection refused at the detect timeout", "reason", reason, "bytes", ic.sniffN)
		return false
	}
	p.m.Refuse(Inbound, refuseNotHTTP)
	log.Info("inbound bytes that are not HTTP refused on an HTTP port", "detected", ic.detected.String())
	const msg = "Bad Request: this port serves HTTP only\n"
	_ = ic.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(ic.conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		httpcore.HeaderProxyError+": "+refuseNotHTTP+": the port serves HTTP only\r\nContent-Length: "+strconv.Itoa(len(msg))+
		"\r\nConnection: close\r\n\r\n"+msg)
	return false
}

// isHTTPProtocol reports whether a Server declares its port HTTP.
func isHTTPProtocol(p authz.Protocol) bool {
	return p == authz.ProtocolHTTP1 || p == authz.ProtocolHTTP2 || p == authz.ProtocolGRPC
}

// hasHTTPRoutes reports whether a server restricts HTTP by routes: a
// route other than the default one, or a route with authorizations of its
// own.
func hasHTTPRoutes(s *authz.Server) bool {
	for i := range s.HTTPRoutes {
		if !s.HTTPRoutes[i].Meta.IsDefault() || len(s.HTTPRoutes[i].Authorizations) > 0 {
			return true
		}
	}
	for i := range s.GRPCRoutes {
		if !s.GRPCRoutes[i].Meta.IsDefault() || len(s.GRPCRoutes[i].Authorizations) > 0 {
			return true
		}
	}
	return false
}

// acceptInbound sniffs the connection, terminates mesh TLS when the client
// asks for this proxy's identity, and finds the target port. The caller
// releases the returned connection's sniffing buffer.
func (p *Paths) acceptInbound(ctx context.Context, c net.Conn) (*inboundConn, error) {
	remote, _ := c.RemoteAddr().(*net.TCPAddr)
	if remote == nil {
		return nil, errors.New("dataplane: not a TCP connection")
	}
	ic := &inboundConn{conn: c, peer: p.peerConn(remote.AddrPort().Addr().Unmap()), remote: remote.AddrPort(),
		detected: detect.Opaque}
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
	// Opaque ports skip HTTP detection, not mesh TLS: a meshed client
	// whose discovery did not mark the port opaque (a Server declaring it
	// opaque, which discovery does not read) connects to the port itself
	// with mesh TLS, and its identity must be verified, not its TLS bytes
	// forwarded as an anonymous client's.
	ic.buf = relay.GetBuf()
	n, proto, sni, err := sniff(c, *ic.buf, deadline, true)
	if err != nil {
		return ic, err
	}
	if proto != detect.TLS || !strings.EqualFold(sni, p.id.Name()) {
		// Not for us: plaintext (or the application's own TLS) from a
		// client without mesh identity.
		if origPort == 0 {
			return ic, refuse(refuseNoTarget, errors.New("direct connection without mesh TLS"))
		}
		if p.opaquePortPolicy(ctx, origPort) {
			// Whatever the client sent (nothing, for a protocol whose
			// server speaks first) goes to the application as it is.
			ic.port, ic.protocol, ic.prefix = origPort, transport.Opaque, (*ic.buf)[:n]
			return ic, p.checkPort(ic.port)
		}
		ic.sniffed, ic.sniffN, ic.detected = true, n, proto
		ic.port, ic.protocol, ic.prefix = origPort, protocolOf(proto), (*ic.buf)[:n]
		return ic, p.checkPort(ic.port)
	}

	// Mesh TLS: replay the ClientHello into the TLS server.
	hello := append([]byte(nil), (*ic.buf)[:n]...)
	ic.release()
	tc := tls.Server(&replayConn{Conn: c, prefix: hello}, p.serverTLS)
	hctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return ic, refuse(refuseHandshake, err)
	}
	cs := tc.ConnectionState()
	ic.conn = tc
	ic.peer.TLS = true
	ic.peer.Identity = p.peerIdentity(cs)
	if cs.NegotiatedProtocol == transport.ALPN {
		// The transport header picks any port of the workload and says
		// how to read the session: only a peer proxy with a verified
		// identity may send it.
		if ic.peer.Identity == "" {
			return ic, refuse(refuseNoIdentity, errors.New("a transport header needs a client certificate"))
		}
		_ = tc.SetReadDeadline(deadline)
		h, err := transport.Read(tc)
		_ = tc.SetReadDeadline(time.Time{})
		if err != nil {
			return ic, refuse(refuseHeader, err)
		}
		ic.port, ic.protocol, ic.fromProxy, ic.dstName = h.Port, h.Protocol, true, h.Name
		return ic, p.checkPort(ic.port)
	}
	if origPort == 0 {
		return ic, refuse(refuseNoTarget, errors.New("mesh TLS without transport header on a direct connection"))
	}
	ic.port = origPort
	if p.opaquePortPolicy(ctx, origPort) {
		return ic, p.checkPort(ic.port)
	}
	if err := ic.sniff(deadline); err != nil {
		return ic, err
	}
	return ic, p.checkPort(ic.port)
}

// checkPort refuses ports the inbound proxy must never forward to: the
// proxy's own listeners and the skip ports always, and, with
// Config.InboundPortsOnly, every port that is not one of the
// application's (Config.InboundPorts). Without it any other port of the
// workload may be named, as in Linkerd: in a pod, the forward address is
// the pod's own loopback, which only the pod's containers listen on, and
// a container may listen on a port it does not declare. Where loopback
// is shared (the local mesh, `weft dev`), other proxies' admin servers
// and the control plane listen beside the workload, so the local mesh
// turns it on.
func (p *Paths) checkPort(port uint16) error {
	switch {
	case port == 0:
		return refuse(refuseNoTarget, errors.New("no target port"))
	case p.cfg.InboundSkipPorts.Contains(port):
		return refuse(refuseSkipPort, fmt.Errorf("target port %d is a skip port", port))
	case p.own.has(port):
		return refuse(refuseOwnPort, fmt.Errorf("target port %d is one of the proxy's own listeners", port))
	case p.cfg.InboundPortsOnly && !p.cfg.InboundPorts.Contains(port):
		return refuse(refuseNotAppPort, fmt.Errorf("target port %d is not one of the application's ports (%q)", port, p.cfg.InboundPorts.String()))
	}
	return nil
}

// opaquePortPolicy reports whether inbound connections to port skip
// protocol detection: configured as opaque, or its policy says so. It waits
// for the port's first policy (which handleInbound needs next anyway), so
// the first connection to a port a Server declares opaque is opaque too.
func (p *Paths) opaquePortPolicy(ctx context.Context, port uint16) bool {
	if p.cfg.InboundOpaquePorts.Contains(port) {
		return true
	}
	if !p.hasPolicies {
		return false
	}
	st, err := p.state.Ports().Get(ctx, uint32(port))
	return err == nil && opaqueServer(st.Proto)
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
