package l4

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// maxDialAttempts bounds how many endpoints one connection tries: as
// many as one HTTP request does.
const maxDialAttempts = outboundhttp.MaxDialAttempts

func (p *Paths) handleTransparent(ctx context.Context, c net.Conn) bool {
	tcpLocal, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return false
	}
	od, err := p.origDst(c)
	local := tcpLocal.AddrPort()
	if err != nil || od == local || (od.Addr().IsLoopback() && p.own.has(od.Port())) {
		p.log.Debug("outbound connection without original destination refused", "client", c.RemoteAddr().String(), "err", err)
		return false
	}
	target := od.String()
	if p.cfg.OutboundSkipPorts.Contains(od.Port()) {
		return p.passthrough(ctx, c, od, nil, p.log.With("direction", Outbound, "target", target))
	}
	return p.outbound(ctx, c, target, od, nil)
}

func (p *Paths) handleMapped(ctx context.Context, c net.Conn, authority string) bool {
	var fallback netip.AddrPort
	if ap, err := netip.ParseAddrPort(authority); err == nil {
		fallback = ap
	}
	return p.outbound(ctx, c, authority, fallback, nil)
}

// maxConnectRequest bounds the CONNECT request head.
const maxConnectRequest = 8 << 10

// limitedConn reads at most n bytes from its connection.
type limitedConn struct {
	net.Conn
	n int
}

func (l *limitedConn) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("dataplane: CONNECT request too large")
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.Conn.Read(p)
	l.n -= n
	return n, err
}

func (p *Paths) handleConnect(ctx context.Context, c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(p.detectTimeout(Outbound)))
	// The reader is sized so that it never reads past the request head
	// into the client's first tunnelled bytes... unless the client sends
	// them early, which the replay below covers.
	br := bufio.NewReaderSize(&limitedConn{Conn: c, n: maxConnectRequest}, 1024)
	req, err := http.ReadRequest(br)
	_ = c.SetReadDeadline(time.Time{})
	reply := func(code int, msg string) {
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(msg), msg)
	}
	if err != nil {
		reply(http.StatusBadRequest, "malformed request\n")
		return false
	}
	if req.Method != http.MethodConnect {
		reply(http.StatusMethodNotAllowed, "only CONNECT is supported\n")
		return false
	}
	authority := req.Host
	if _, _, err := net.SplitHostPort(authority); err != nil {
		reply(http.StatusBadRequest, "CONNECT target must be host:port\n")
		return false
	}
	var fallback netip.AddrPort
	if ap, err := netip.ParseAddrPort(authority); err == nil {
		fallback = ap
	}
	// Bytes the client sent after the request head stay ahead of the rest.
	var early []byte
	if n := br.Buffered(); n > 0 {
		early, _ = br.Peek(n)
		early = append([]byte(nil), early...)
	}
	conn := net.Conn(c)
	if len(early) > 0 {
		conn = &replayConn{Conn: c, prefix: early}
	}
	return p.outbound(ctx, conn, authority, fallback, func(err error) error {
		if err != nil {
			reply(http.StatusBadGateway, err.Error()+"\n")
			return err
		}
		_, err = io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		return err
	})
}

// outbound proxies one client connection to target. fallback, when valid,
// is where a target unknown to discovery is sent in plaintext. resolved,
// when set, is told the resolution result before any byte is read from the
// client (the CONNECT listener answers the client there).
func (p *Paths) outbound(ctx context.Context, client net.Conn, target string, fallback netip.AddrPort, resolved func(error) error) bool {
	log := p.log.With("direction", Outbound, "target", target)
	notify := func(err error) bool {
		if resolved == nil {
			return err == nil
		}
		return resolved(err) == nil && err == nil
	}
	if !p.hasResolver {
		if !fallback.IsValid() {
			notify(errors.New("dataplane: no resolver for " + target))
			return false
		}
		return notify(nil) && p.passthrough(ctx, client, fallback, nil, log)
	}
	dest, err := p.state.Destinations().Get(ctx, target)
	if p.state.NotFound(err) && fallback.IsValid() && p.state.HasOutboundPolicies() {
		// Its EgressNetwork, if any, decides (internal/meshstate, egress.go).
		if d, eerr := p.state.EgressDest(ctx, target, fallback); d != nil || eerr != nil {
			dest, err = d, eerr
		}
	}
	if err != nil {
		if p.state.NotFound(err) && fallback.IsValid() {
			return notify(nil) && p.passthrough(ctx, client, fallback, nil, log)
		}
		log.Info("outbound connection failed", "err", err)
		notify(err)
		return false
	}
	handedOff := false
	defer func() {
		if !handedOff {
			dest.Release()
		}
	}()
	set := dest.Set()
	if len(set.Endpoints()) == 0 && (set.Opaque() || resolved != nil) {
		log.Info("outbound connection failed: no endpoints")
		notify(fmt.Errorf("dataplane: %s has no endpoints", target))
		return false
	}
	if !notify(nil) {
		return false
	}

	// Detection (unless discovery says the destination is opaque).
	proto := transport.Opaque
	var prefix []byte
	var sniffBuf *[]byte
	release := func() {
		if sniffBuf != nil {
			relay.PutBuf(sniffBuf)
			sniffBuf = nil
		}
	}
	defer release()
	if !set.Opaque() && !(dest.Ext.Egress() && p.state.EgressOpaque(ctx, dest)) {
		sniffBuf = relay.GetBuf()
		n, dp, _, err := sniff(client, *sniffBuf, time.Now().Add(p.detectTimeout(Outbound)), false)
		if err != nil {
			return false
		}
		if n == 0 {
			// Nothing before the detect timeout: the client is closed, not
			// handed to an endpoint (a mutual TLS dial each). Protocols
			// whose server speaks first belong on opaque ports.
			p.m.Refuse(Outbound, refuseSilent)
			log.Debug("silent outbound connection closed at the detect timeout")
			return false
		}
		proto, prefix = protocolOf(dp), (*sniffBuf)[:n]
	}

	// HTTP is proxied request by request, unless the destination's
	// outbound policy says it is opaque.
	if proto == transport.HTTP1 || proto == transport.HTTP2 {
		svc := p.state.Service(ctx, dest)
		if !svc.Router().Opaque {
			conn := &replayConn{Conn: client, prefix: append([]byte(nil), prefix...)}
			release()
			handedOff = true
			info := &connInfo{direction: Outbound, svc: svc}
			info.Remote, info.TargetAddr = remoteOf(client), fallback
			p.serveHTTP(conn, proto, info, connmetrics.OutboundSrc(fallback), func() {
				dest.Release()
				p.untrack(client)
			})
			return true
		}
	}
	// TCPRoutes and TLSRoutes of the policy (streams.go).
	if handled, ok := p.outboundStream(ctx, client, dest, target, prefix, fallback, log); handled {
		handedOff = ok
		return ok
	}
	// The policy's built-in opaque route, counted as Linkerd's proxy
	// counts it (streams.go).
	rc := p.opaqueRouteOpened(ctx, dest, fallback)
	if dest.Ext.Egress() && p.state.EgressRefusesOpaque(ctx, dest, log) {
		rc.closed(routeClosedForbidden)
		return false
	}
	set = dest.Set()
	if len(set.Endpoints()) == 0 {
		rc.closed(routeClosedUnexpected)
		log.Info("outbound connection failed: no endpoints")
		return false
	}

	var tried []*meshstate.Balanced
	for attempt := 0; attempt < maxDialAttempts; attempt++ {
		ep := set.Pick(tried)
		if ep == nil {
			break
		}
		tried = append(tried, ep)
		server, err := p.dialEndpoint(ctx, ep.Endpoint, target, proto, prefix)
		if err != nil {
			log.Info("endpoint failed", "endpoint", ep.Addr.String(), "identity", ep.Identity, "err", err)
			continue
		}
		release() // the detected bytes went out with the dial
		ep.Active.Add(1)
		src := p.m.Opened(connmetrics.OutboundSrc(fallback))
		dst := p.m.Opened(connmetrics.OutboundDst(p.m.HTTP.AuthorityLabel(target), ep.Endpoint))
		log.Debug("outbound connection open", "endpoint", ep.Addr.String(), "identity", ep.Identity, "protocol", proto.String())
		handedOff = true
		p.pipe(client, client, server, src, dst, func() {
			src.Closed()
			dst.Closed()
			rc.closed(routeClosedOK)
			ep.Active.Add(-1)
			dest.Release()
			p.untrack(client)
		})
		return true
	}
	rc.closed(routeClosedUnexpected)
	log.Info("outbound connection failed: no endpoint reachable", "tried", len(tried))
	return false
}

// dialEndpoint connects to ep: mutual TLS with the transport header when it
// has an identity, plaintext otherwise. prefix is sent first.
func (p *Paths) dialEndpoint(ctx context.Context, ep endpoint.Endpoint, target string, proto transport.Protocol, prefix []byte) (net.Conn, error) {
	addr := ep.Addr
	if ep.Identity != "" && ep.OpaqueTransportPort != 0 {
		addr = netip.AddrPortFrom(ep.Addr.Addr(), ep.OpaqueTransportPort)
	}
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	defer cancel()
	raw, err := p.dialer.DialContext(dctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	if ep.Identity == "" {
		if err := writeAll(raw, prefix); err != nil {
			raw.Close()
			return nil, err
		}
		return raw, nil
	}
	if err := p.CertificateOK(); err != nil {
		raw.Close()
		return nil, err
	}
	tc := tls.Client(raw, p.clientConfig(ep.Identity))
	if err := tc.HandshakeContext(dctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("dataplane: mesh TLS with %s: %w", ep.Identity, err)
	}
	var hdr []byte
	if tc.ConnectionState().NegotiatedProtocol == transport.ALPN {
		h := transport.Header{Port: ep.Addr.Port(), Protocol: proto}
		if _, _, err := net.SplitHostPort(target); err == nil && len(target) <= transport.MaxNameLen {
			h.Name = target
		}
		var b [transport.MaxLen]byte
		if hdr, err = h.Append(b[:0]); err != nil {
			h.Name = ""
			hdr, _ = h.Append(b[:0])
		}
	}
	if err := writeAll(tc, hdr, prefix); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}

// remoteOf returns a connection's peer address (invalid when it is not
// TCP).
func remoteOf(c net.Conn) netip.AddrPort {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

// passthrough forwards a connection to its original destination unchanged
// (plaintext, no identity).
func (p *Paths) passthrough(ctx context.Context, client net.Conn, to netip.AddrPort, prefix []byte, log *slog.Logger) bool {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
	server, err := p.dialer.DialContext(dctx, "tcp", to.String())
	cancel()
	if err != nil {
		log.Info("passthrough failed", "err", err)
		return false
	}
	if err := writeAll(server, prefix); err != nil {
		server.Close()
		return false
	}
	src := p.m.Opened(connmetrics.OutboundSrc(to))
	dst := p.m.Opened(connmetrics.OutboundDst("", endpoint.Endpoint{Addr: to}))
	p.pipe(client, client, server, src, dst, func() {
		src.Closed()
		dst.Closed()
		p.untrack(client)
	})
	return true
}
