package l4

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/accesslog"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Direction label values (connmetrics'; the dataplane package exports
// them as Inbound and Outbound).
const (
	Inbound  = connmetrics.Inbound
	Outbound = connmetrics.Outbound
)

// Ports is a set of ports from the configuration (dataplane.Ports).
type Ports interface {
	Contains(port uint16) bool
	String() string
}

// Config is what the paths read of the proxy's configuration: the
// fields of dataplane.Config of the same names, which the dataplane
// package copies (its doc says what each is).
type Config struct {
	InboundForwardHost string

	DetectTimeout, InboundDetectTimeout, OutboundDetectTimeout time.Duration
	ConnectTimeout, InboundConnectTimeout                      time.Duration
	ShutdownGracePeriod                                        time.Duration

	InboundPorts, InboundOpaquePorts, InboundSkipPorts, OutboundSkipPorts, RequireIdentityPorts Ports
	InboundPortsOnly                                                                            bool
	OutboundSendBuffer                                                                          int

	HTTPIdleTimeout, HTTPHeaderTimeout time.Duration
	HTTPMaxHeaderBytes                 int
	HTTPPoolWaitTimeout                time.Duration
	HTTP1OverH2                        bool
	H2MaxConcurrentStreams             uint32
	H2StreamWindow                     int32
	H2InitialStreamWindow              int32
	H2ConnectionWindow                 int32
	H2ResetBudget                      int
	H2BufferLimit                      int64
	H2WriteTimeout                     time.Duration
}

// Identity is the proxy's workload identity (dataplane.Identity).
type Identity interface {
	Name() string
	Certificate() (*tls.Certificate, error)
}

// Settings is what New is given besides the Config: the proxy's
// identity and mesh TLS, its state, metrics, tap, access log and tracer,
// and the hooks the dataplane package's options set.
type Settings struct {
	Identity Identity
	// ServerTLS is mesh TLS for inbound connections; ClientTLS makes it
	// for a server that must be serverID (cached per identity here).
	// PeerIdentity reads a verified peer's identity from a handshake
	// made with either (dataplane.PeerIdentity).
	ServerTLS    *tls.Config
	ClientTLS    func(serverID string) *tls.Config
	PeerIdentity func(tls.ConnectionState) string

	State   *meshstate.State
	Metrics *connmetrics.Set
	Tap     *tap.Hub
	Access  *accesslog.Log // nil: no access log
	Tracer  trace.Tracer   // nil: tracing off (trace.go)
	Log     *slog.Logger
	Now     func() time.Time

	// OrigDst reads a redirected connection's original destination.
	OrigDst func(net.Conn) (netip.AddrPort, error)
	// Loopback lets inbound clients on loopback through whatever the
	// policy (dataplane.WithLoopbackAllowed).
	Loopback bool
	// HasResolver: discovery is configured (without it every outbound
	// connection goes to its original destination).
	HasResolver bool
	// HasPolicies: an inbound policy source is configured (without it
	// every port has the default policy).
	HasPolicies bool

	// The frame path's test hooks: off, and a call before each call it
	// serves, per direction.
	NoGRPCFrames   bool
	OnGRPCFrame    func()
	OnGRPCOutFrame func()
}

// Paths are the proxy's connection paths: what happens to each
// connection its listeners accept, from detection to the relay or the
// HTTP servers, in both directions, and the tracking that drains them.
type Paths struct {
	cfg Config
	id  Identity
	log *slog.Logger
	m   *connmetrics.Set
	tap *tap.Hub
	now func() time.Time

	state       *meshstate.State
	http        *httpRuntime
	in          *inboundhttp.HTTP  // the inbound HTTP side (internal/inbound)
	out         *outboundhttp.HTTP // the outbound HTTP side (internal/outbound)
	noPolicy    *meshstate.Policy  // caches the series of requests to ports without a policy
	hasResolver bool
	hasPolicies bool

	forwardAddr  netip.Addr
	serverTLS    *tls.Config
	clientTLS    sync.Map // server identity -> *tls.Config
	newClientTLS func(serverID string) *tls.Config
	peerIdentity func(tls.ConnectionState) string
	dialer       net.Dialer
	origDst      func(net.Conn) (netip.AddrPort, error)
	loopback     bool
	access       *accesslog.Log
	tracer       trace.Tracer

	runCtx context.Context // set by Accept, before any connection

	own  portSet // the proxy's own listener ports, never forwarded to
	self connSet // loopback connections the proxy dialled itself

	connsMu sync.Mutex
	conns   map[net.Conn]*relay.Pipe // tracked connections; the pipe once piped
	active  sync.WaitGroup

	idle       atomic.Pointer[relay.Poller] // set by Accept; nil: idle copies keep their goroutines
	idleLinger time.Duration                // quiet time before a copy direction parks; 0: the relay's default (tests shorten it)
}

// New builds the paths: the HTTP servers and the pools to upstreams,
// and both directions' HTTP sides over them.
func New(cfg Config, s Settings) (*Paths, error) {
	fwd, err := netip.ParseAddr(cfg.InboundForwardHost)
	if err != nil {
		return nil, fmt.Errorf("dataplane: inbound forward host: %w", err)
	}
	p := &Paths{
		cfg: cfg, id: s.Identity, log: s.Log, m: s.Metrics, tap: s.Tap, now: s.Now,
		state: s.State, noPolicy: &meshstate.Policy{}, hasResolver: s.HasResolver, hasPolicies: s.HasPolicies,
		forwardAddr: fwd, serverTLS: s.ServerTLS, newClientTLS: s.ClientTLS, peerIdentity: s.PeerIdentity,
		dialer:  net.Dialer{Timeout: cfg.ConnectTimeout},
		origDst: s.OrigDst, loopback: s.Loopback, access: s.Access, tracer: s.Tracer,
		conns: map[net.Conn]*relay.Pipe{},
	}
	if p.http, err = newHTTPRuntime(p); err != nil {
		return nil, err
	}
	p.in = &inboundhttp.HTTP{
		Policy: p.state.Ports().Get, NoPolicy: p.noPolicy, Route: p.state.InboundRoute,
		Metrics: p.m.HTTP, Tap: p.tap, Log: p.log,
		App: p.forwardAddr, Dial: p.dialWithin, AppH1: p.http.appH1,
		AppH2: func(req *http.Request, app netip.AddrPort) (*http.Response, error) {
			return p.http.pool.RoundTrip(upstream.Key{Addr: app}, req, nil, upstream.Labels{Inbound: true})
		},
		AppH2Fields: func(ctx context.Context, req *inboundhttp.FieldRequest, app netip.AddrPort) (inboundhttp.FieldResponse, error) {
			resp, err := p.http.pool.RoundTripFields(ctx, upstream.Key{Addr: app}, &h2client.FieldRequest{Method: req.Method, Scheme: "http",
				Authority: req.Authority, Path: req.Path, Fields: req.Fields, Body: req.Body}, upstream.Labels{Inbound: true})
			if err != nil {
				return inboundhttp.FieldResponse{}, err
			}
			return inboundhttp.FieldResponse{Status: resp.Status, Fields: resp.Fields, Body: resp.Body, Trailers: resp}, nil
		},
		UpstreamTimer: accesslog.UpstreamTimer,
	}
	if !s.NoGRPCFrames && p.access == nil && p.tracer == nil {
		// gRPC calls for the application take the frame path, unless an
		// access log or a tracer wants the http.Request (http.go).
		p.http.grpcStreams = p.grpcStreams(s.OnGRPCFrame)
	}
	if !s.NoGRPCFrames && p.tracer == nil {
		// And the application's gRPC calls, unless a tracer wants the
		// http.Request (grpcout.go).
		p.http.grpcOutStreams = p.grpcOutStreams(s.OnGRPCOutFrame)
	}
	p.out = &outboundhttp.HTTP{
		RoundTrip:       p.http.toEndpoint,
		RoundTripFields: p.http.toEndpointFields,
		DialEndpoint:    p.dialEndpoint, Dial: p.dialTracked, ConnectTimeout: cfg.ConnectTimeout,
		Metrics: p.m.HTTP, Tap: p.tap, Log: p.log, Now: p.now,
	}
	return p, nil
}

// SweepPools drops the pooled connections to upstreams that have been
// idle past their timeouts (the destinations' janitor calls it).
func (p *Paths) SweepPools() {
	p.http.pool.Sweep()
	p.http.peerH1.Sweep()
	p.http.appH1.Sweep()
	p.http.extH1.Sweep()
}

// Listeners are the listeners Accept serves; any may be nil.
type Listeners struct {
	Inbound, Outbound, Connect net.Listener
	Mapped                     []Mapped
}

// Mapped is a static explicit-mode outbound listener and the authority
// its connections go to.
type Mapped struct {
	Listener  net.Listener
	Authority string
}

// Accept serves ls under ctx (the proxy's run context) until the
// returned stop is called, which closes them and returns once no accept
// loop runs. Idle copy directions park in an epoll set of the paths'
// own (relay.Poller); where there is none they keep their goroutines.
func (p *Paths) Accept(ctx context.Context, ls Listeners) (stop func()) {
	p.runCtx = ctx
	if ip, err := relay.NewPoller(); err == nil {
		p.idle.Store(ip)
	} else {
		p.log.Debug("idle connections keep their goroutines", "err", err)
	}
	var accepting sync.WaitGroup
	serve := func(l net.Listener, handle func(context.Context, net.Conn) bool) {
		if l == nil {
			return
		}
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			p.acceptLoop(ctx, l, handle)
		}()
	}
	serve(ls.Inbound, p.handleInbound)
	serve(ls.Outbound, p.fromApplication(p.handleTransparent))
	serve(ls.Connect, p.fromApplication(p.handleConnect))
	for _, m := range ls.Mapped {
		authority := m.Authority
		serve(m.Listener, p.fromApplication(func(ctx context.Context, c net.Conn) bool { return p.handleMapped(ctx, c, authority) }))
	}
	return func() {
		for _, l := range []net.Listener{ls.Inbound, ls.Outbound, ls.Connect} {
			if l != nil {
				l.Close()
			}
		}
		for _, m := range ls.Mapped {
			m.Listener.Close()
		}
		accepting.Wait()
	}
}

// Drain lets the tracked connections finish for up to the shutdown
// grace period, closes the rest, and then the pools. HTTP/2 clients got
// GOAWAY when the run context ended (their servers watch it): streams
// in flight finish, no new ones start; HTTP/1 connections close once
// idle.
func (p *Paths) Drain() {
	p.log.Info("draining", "open", p.openConns(), "grace", p.cfg.ShutdownGracePeriod)
	drained := make(chan struct{})
	go func() {
		p.active.Wait()
		close(drained)
	}()
	timer := time.NewTimer(p.cfg.ShutdownGracePeriod)
	select {
	case <-drained:
		timer.Stop()
	case <-timer.C:
		n := p.closeAll()
		p.log.Warn("grace period over, closing connections", "closed", n)
		<-drained
	}
	p.idle.Load().Stop() // nothing is parked once every tracked connection ended
	p.http.pool.CloseAll()
	p.http.peerH1.CloseAll()
	p.http.appH1.CloseIdle(true)
	p.http.extH1.CloseIdle(true)
}

// acceptLoop accepts connections and hands each to handle on its own
// goroutine. handle returns true when it passed the connection on to pipe,
// whose completion untracks it; otherwise the connection is closed when
// handle returns.
func (p *Paths) acceptLoop(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn) bool) {
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, keep serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			p.log.Warn("accept failed", "listener", l.Addr().String(), "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		if !p.track(c) {
			c.Close()
			continue
		}
		go func() {
			if !handle(ctx, c) {
				p.untrack(c)
			}
		}()
	}
}

// fromApplication wraps the handler of an outbound listener, whose
// clients are the local application: each connection's kernel send
// buffer is fixed at Config.OutboundSendBuffer before anything is
// written to it, so that a client that stops reading holds that much of
// a response in the kernel, not the up to 4 MiB autotuning would give it
// (and pull through both proxies first).
func (p *Paths) fromApplication(handle func(context.Context, net.Conn) bool) func(context.Context, net.Conn) bool {
	n := p.cfg.OutboundSendBuffer
	if n == 0 {
		return handle
	}
	return func(ctx context.Context, c net.Conn) bool {
		if s, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
			if err := s.SetWriteBuffer(n); err != nil {
				p.log.Debug("outbound send buffer not set", "client", c.RemoteAddr().String(), "err", err)
			}
		}
		return handle(ctx, c)
	}
}

// track registers a connection for the drain; it refuses once the proxy
// is closing everything.
func (p *Paths) track(c net.Conn) bool {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = nil
	p.active.Add(1)
	return true
}

// piped records the pipe of a tracked connection, so that closeAll ends it
// whole (its parked directions see no socket event when a connection
// closes); false when the proxy is already closing everything.
func (p *Paths) piped(c net.Conn, ps *relay.Pipe) bool {
	if r, ok := c.(*replayConn); ok {
		c = r.Conn
	}
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	if p.conns == nil {
		return false
	}
	if _, ok := p.conns[c]; ok {
		p.conns[c] = ps
	}
	return true
}

func (p *Paths) untrack(c net.Conn) {
	if r, ok := c.(*replayConn); ok {
		c = r.Conn
	}
	c.Close()
	p.connsMu.Lock()
	if p.conns != nil {
		delete(p.conns, c)
	}
	p.connsMu.Unlock()
	p.active.Done()
}

func (p *Paths) openConns() int {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	return len(p.conns)
}

func (p *Paths) closeAll() int {
	p.connsMu.Lock()
	conns := p.conns
	p.conns = nil
	p.connsMu.Unlock()
	for c, ps := range conns {
		if ps != nil {
			ps.Close()
		}
		c.Close()
	}
	return len(conns)
}

// clientConfig returns the shared client TLS config for a server identity.
func (p *Paths) clientConfig(serverID string) *tls.Config {
	if c, ok := p.clientTLS.Load(serverID); ok {
		return c.(*tls.Config)
	}
	c, _ := p.clientTLS.LoadOrStore(serverID, p.newClientTLS(serverID))
	return c.(*tls.Config)
}

// CertificateOK reports whether the proxy holds an unexpired certificate.
func (p *Paths) CertificateOK() error {
	c, err := p.id.Certificate()
	if err != nil {
		return err
	}
	if c == nil || c.Leaf == nil {
		return errors.New("dataplane: certificate without leaf")
	}
	if now := p.now(); now.After(c.Leaf.NotAfter) {
		return fmt.Errorf("dataplane: certificate expired at %s", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// peerConn describes an inbound client for authorization from its socket
// address; TLS and identity are added once the handshake is done.
func (p *Paths) peerConn(ip netip.Addr) authz.Conn {
	return authz.Conn{IP: ip, Loopback: p.loopback && ip.IsLoopback()}
}

// detectTimeout is the protocol detection timeout of a direction.
func (p *Paths) detectTimeout(direction string) time.Duration {
	switch {
	case direction == Inbound && p.cfg.InboundDetectTimeout > 0:
		return p.cfg.InboundDetectTimeout
	case direction == Outbound && p.cfg.OutboundDetectTimeout > 0:
		return p.cfg.OutboundDetectTimeout
	}
	return p.cfg.DetectTimeout
}

// writeAll writes the pieces as one write (one TLS record where possible).
func writeAll(w io.Writer, parts ...[]byte) error {
	total := 0
	for _, b := range parts {
		total += len(b)
	}
	if total == 0 {
		return nil
	}
	var one []byte
	if total <= relay.BufSize {
		buf := relay.GetBuf()
		defer relay.PutBuf(buf)
		one = (*buf)[:0]
	}
	for _, b := range parts {
		one = append(one, b...)
	}
	_, err := w.Write(one)
	return err
}
