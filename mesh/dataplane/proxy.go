package dataplane

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

	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/dataplane/internal/accesslog"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/origdst"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Proxy is the Weft data plane for one workload. Build it with New and run
// it with Run, giving it the listeners it serves.
type Proxy struct {
	cfg      Config
	id       Identity
	resolver Resolver
	policies InboundPolicies
	log      *slog.Logger
	reg      *prometheus.Registry
	m        *connmetrics.Set
	tap      *tap.Hub
	now      func() time.Time

	outPolicies OutboundPolicies
	profiles    Profiles
	http        *httpRuntime

	noPolicy    *meshstate.Policy // caches the series of requests to ports without a policy
	forwardAddr netip.Addr
	serverTLS   *tls.Config
	clientTLS   sync.Map // server identity -> *tls.Config
	dialer      net.Dialer
	destIdle    time.Duration
	origDst     func(net.Conn) (netip.AddrPort, error)
	loopback    bool           // see WithLoopbackAllowed
	access      *accesslog.Log // nil unless cfg.AccessLog is set

	tracer trace.Tracer // nil unless WithTracer: tracing off (trace_hook.go)

	running  atomic.Bool
	draining atomic.Bool
	runCtx   context.Context
	stop     context.CancelFunc // set by Run; /shutdown calls it
	stopMu   sync.Mutex

	own  portSet // the proxy's own listener ports, never forwarded to
	self connSet // loopback connections the proxy dialled itself

	state *meshstate.State   // destinations, port policies, peers' Services' profiles (internal/meshstate)
	in    *inboundhttp.HTTP  // the inbound HTTP side (internal/inbound)
	out   *outboundhttp.HTTP // the outbound HTTP side (internal/outbound)

	connsMu sync.Mutex
	conns   map[net.Conn]*relay.Pipe // tracked connections; the pipe once piped
	active  sync.WaitGroup

	idle       atomic.Pointer[relay.Poller] // set by Run before it accepts; nil: idle copies keep their goroutines
	idleLinger time.Duration                // quiet time before a copy direction parks; 0: the relay's default (tests shorten it)
}

// Option tunes a Proxy.
type Option func(*options)

type options struct {
	log         *slog.Logger
	reg         *prometheus.Registry
	now         func() time.Time
	destIdle    time.Duration
	origDst     func(net.Conn) (netip.AddrPort, error)
	outPolicies OutboundPolicies
	profiles    Profiles
	loopback    bool // see WithLoopbackAllowed
	accessLog   io.Writer
	tracer      trace.Tracer

	// The frame path's test hooks (export_test.go): off, and a call
	// before each call it serves.
	noGRPCFrames bool
	onGRPCFrame  func()
	// onGRPCOutFrame is called for each outbound call the frame path
	// serves (a test hook).
	onGRPCOutFrame func()
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegistry makes the proxy register its metrics in reg and serve reg
// on /metrics (default: a registry of its own, with Go and process metrics).
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.reg = reg } }

// WithClock sets the clock used for certificate checks, by the HTTP
// balancers' latency estimates and failure accrual, and by the inbound
// rate limits' buckets (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithDestinationIdleTimeout sets how long a destination nobody connects to
// keeps its discovery watch (default one minute).
func WithDestinationIdleTimeout(d time.Duration) Option {
	return func(o *options) { o.destIdle = d }
}

// WithOriginalDestination replaces the lookup of a redirected connection's
// original destination (SO_ORIGINAL_DST on Linux). It exists for platforms
// and tests without netfilter; f returns an error for connections that were
// not redirected.
func WithOriginalDestination(f func(net.Conn) (netip.AddrPort, error)) Option {
	return func(o *options) { o.origDst = f }
}

// WithOutboundPolicies sets the source of outbound policies (HTTPRoute and
// GRPCRoute routing, retries, timeouts, failure accrual). Without one,
// requests go to their destination with no retries or timeouts.
func WithOutboundPolicies(src OutboundPolicies) Option {
	return func(o *options) { o.outPolicies = src }
}

// WithAccessLog sets where the access log goes when Config.AccessLog
// names a format (the proxy binary uses stderr, as Linkerd's does). Lines
// are written whole, one Write each, from any goroutine.
func WithAccessLog(w io.Writer) Option { return func(o *options) { o.accessLog = w } }

// WithProfiles sets the source of ServiceProfiles (per-route retries and
// timeouts, retry budget, traffic split). Without one, no profile
// applies.
func WithProfiles(src Profiles) Option { return func(o *options) { o.profiles = src } }

// New builds a proxy. id is required; resolver may be nil (every outbound
// connection then goes to its original destination in plaintext) and so
// may policies (every port then gets cfg.DefaultInboundPolicy). ctx
// bounds the start only (New starts nothing and fails if ctx has already
// ended); the proxy serves for the context given to Run.
func New(ctx context.Context, cfg Config, id Identity, resolver Resolver, policies InboundPolicies, opts ...Option) (*Proxy, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	if id == nil {
		return nil, errors.New("dataplane: an Identity is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := options{log: slog.New(slog.DiscardHandler), now: time.Now, destIdle: time.Minute, origDst: originalDstOf}
	if cfg.DestinationIdleTimeout > 0 {
		o.destIdle = cfg.DestinationIdleTimeout
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
		connmetrics.RegisterRuntime(o.reg)
	}
	set, err := connmetrics.New(o.reg, id.Certificate)
	if err != nil {
		return nil, fmt.Errorf("dataplane: registering metrics: %w", err)
	}
	m := set
	hub := tap.NewHub(cfg.TapMaxTaps, cfg.TapMaxEventsPerSecond)
	for _, c := range hub.Collectors() {
		if err := o.reg.Register(c); err != nil {
			return nil, fmt.Errorf("dataplane: registering metrics: %w", err)
		}
	}
	def, err := defaultPolicy(cfg.DefaultInboundPolicy, cfg.ClusterNetworks)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		cfg: cfg, id: id, resolver: resolver, policies: policies,
		log: o.log, reg: o.reg, m: m, tap: hub, now: o.now, loopback: o.loopback,
		outPolicies: o.outPolicies,
		profiles:    o.profiles,
		noPolicy:    &meshstate.Policy{},
		forwardAddr: netip.MustParseAddr(cfg.InboundForwardHost),
		serverTLS:   ServerTLSConfig(id, o.now),
		dialer:      net.Dialer{Timeout: cfg.ConnectTimeout},
		destIdle:    o.destIdle,
		origDst:     o.origDst,
		tracer:      o.tracer,
		conns:       map[net.Conn]*relay.Pipe{},
	}
	for _, addr := range []string{cfg.InboundAddr, cfg.OutboundAddr, cfg.ConnectAddr, cfg.AdminAddr} {
		p.own.add(configuredPort(addr))
	}
	for _, m := range cfg.Mappings {
		p.own.add(configuredPort(m.Listen))
	}
	if len(cfg.TapIdentities) > 0 { // as Listen: the tap port is open only then
		p.own.add(configuredPort(cfg.TapAddr))
	}
	if cfg.AccessLog != "" {
		if o.accessLog == nil {
			return nil, errors.New("dataplane: an access log format is set but no writer (WithAccessLog)")
		}
		if p.access, err = accesslog.New(cfg.AccessLog, o.accessLog, o.now); err != nil {
			return nil, err
		}
	}
	p.state = meshstate.New(meshstate.Settings{
		Resolver: resolver, Policies: policies, OutPolicies: o.outPolicies, Profiles: o.profiles,
		Lifetime:       func() context.Context { return p.runCtx },
		ResolveTimeout: cfg.ResolveTimeout, PolicyTimeout: cfg.PolicyTimeout, DestIdle: o.destIdle,
		DefaultPolicy: &meshstate.Policy{Proto: authz.ToProto(def), Srv: def}, DefaultName: cfg.DefaultInboundPolicy,
		Compile: compilePolicy, DenyAll: denyAllPolicy, NotFound: ErrNotFound,
		Sweep: func() {
			if p.http != nil {
				p.http.pool.Sweep()
				p.http.peerH1.Sweep()
				p.http.appH1.Sweep()
				p.http.extH1.Sweep()
			}
		},
		Metrics: m, Log: o.log, Now: o.now,
	})
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
	if !o.noGRPCFrames && p.access == nil && p.tracer == nil {
		// gRPC calls for the application take the frame path, unless an
		// access log or a tracer wants the http.Request (http.go).
		p.http.grpcStreams = p.grpcStreams(o.onGRPCFrame)
	}
	if !o.noGRPCFrames && p.tracer == nil {
		// And the application's gRPC calls, unless a tracer wants the
		// http.Request (grpc_out.go).
		p.http.grpcOutStreams = p.grpcOutStreams(o.onGRPCOutFrame)
	}
	p.out = &outboundhttp.HTTP{
		RoundTrip:       p.http.toEndpoint,
		RoundTripFields: p.http.toEndpointFields,
		DialEndpoint:    p.dialEndpoint, Dial: p.dialTracked, ConnectTimeout: cfg.ConnectTimeout,
		Metrics: p.m.HTTP, Tap: p.tap, Log: p.log, Now: p.now,
	}
	return p, nil
}

// Registry returns the registry /metrics serves.
func (p *Proxy) Registry() *prometheus.Registry { return p.reg }

// Run serves ls until ctx is cancelled (or /shutdown is called), then
// drains: it stops accepting at once, reports not ready, lets open
// connections finish for up to the shutdown grace period, closes the rest
// and returns nil. A Proxy runs once. ls must hold at least one listener
// that carries traffic (inbound, outbound, connect or mapped); they need
// not be at Config's addresses, which only Listen reads.
func (p *Proxy) Run(ctx context.Context, ls Listeners) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("dataplane: proxy already ran")
	}
	if ls.Inbound == nil && ls.Outbound == nil && ls.Connect == nil && len(ls.Mapped) == 0 {
		p.running.Store(false) // nothing started: a later Run with listeners may still run
		return errors.New("dataplane: Run needs an inbound, outbound, connect or mapped listener")
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	p.stopMu.Lock()
	p.runCtx, p.stop = runCtx, stop
	p.stopMu.Unlock()

	for _, l := range ls.all() {
		p.own.add(listenerPort(l))
	}

	// Policies of the declared ports are fetched up front: readiness waits
	// for them. Without a policy source there is nothing to fetch (every
	// port has the default policy).
	for _, port := range p.cfg.InboundPorts.List() {
		if p.policies == nil {
			break
		}
		p.state.Ports().Start(uint32(port))
	}
	go p.state.Destinations().Janitor(runCtx)

	var admin *http.Server
	adminDone := make(chan struct{})
	if ls.Admin != nil {
		admin = p.adminServer()
		go func() {
			defer close(adminDone)
			_ = admin.Serve(p.capAdmin(ls.Admin))
		}()
	} else {
		close(adminDone)
	}

	tapCtx, stopTap := context.WithCancel(runCtx)
	tapDone := make(chan struct{})
	if ls.Tap != nil {
		go func() {
			defer close(tapDone)
			p.serveTap(tapCtx, ls.Tap)
		}()
	} else {
		close(tapDone)
	}

	// Idle copy directions park in an epoll set of the proxy's own
	// (pipe); where there is none they keep their goroutines.
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
			p.acceptLoop(runCtx, l, handle)
		}()
	}
	serve(ls.Inbound, p.handleInbound)
	serve(ls.Outbound, p.fromApplication(p.handleTransparent))
	serve(ls.Connect, p.fromApplication(p.handleConnect))
	for _, m := range ls.Mapped {
		authority := m.Authority
		serve(m.Listener, p.fromApplication(func(ctx context.Context, c net.Conn) bool { return p.handleMapped(ctx, c, authority) }))
	}
	p.log.Info("proxy started", "inbound", addrOf(ls.Inbound), "outbound", addrOf(ls.Outbound),
		"connect", addrOf(ls.Connect), "admin", addrOf(ls.Admin), "mappings", len(ls.Mapped))

	<-runCtx.Done()

	// Drain. Taps end at once: they observe traffic, they are not traffic.
	p.draining.Store(true)
	stopTap()
	<-tapDone
	for _, l := range []net.Listener{ls.Inbound, ls.Outbound, ls.Connect} {
		if l != nil {
			l.Close()
		}
	}
	for _, m := range ls.Mapped {
		m.Listener.Close()
	}
	accepting.Wait()
	p.log.Info("draining", "open", p.openConns(), "grace", p.cfg.ShutdownGracePeriod)
	// HTTP/2 clients got GOAWAY when runCtx ended (their servers watch
	// it): streams in flight finish, no new ones start; HTTP/1
	// connections close once idle.
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
	p.state.Destinations().CloseAll()
	p.state.Ports().CloseAll()
	if admin != nil {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = admin.Shutdown(sctx)
		cancel()
		<-adminDone
	}
	p.log.Info("proxy stopped")
	return nil
}

func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

// Shutdown starts the drain as if Run's context had been cancelled.
func (p *Proxy) Shutdown() {
	p.stopMu.Lock()
	defer p.stopMu.Unlock()
	if p.stop != nil {
		p.stop()
	}
}

// acceptLoop accepts connections and hands each to handle on its own
// goroutine. handle returns true when it passed the connection on to pipe,
// whose completion untracks it; otherwise the connection is closed when
// handle returns.
func (p *Proxy) acceptLoop(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn) bool) {
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

// The bounds of Config.OutboundSendBuffer: the kernel's own floor
// (SOCK_MIN_SNDBUF is about 4.5 KiB) and a ceiling far above any
// loopback need.
const (
	minSendBuffer = 4 << 10
	maxSendBuffer = 64 << 20
)

// fromApplication wraps the handler of an outbound listener, whose
// clients are the local application: each connection's kernel send
// buffer is fixed at Config.OutboundSendBuffer before anything is
// written to it, so that a client that stops reading holds that much of
// a response in the kernel, not the up to 4 MiB autotuning would give it
// (and pull through both proxies first).
func (p *Proxy) fromApplication(handle func(context.Context, net.Conn) bool) func(context.Context, net.Conn) bool {
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
func (p *Proxy) track(c net.Conn) bool {
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
func (p *Proxy) piped(c net.Conn, ps *relay.Pipe) bool {
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

func (p *Proxy) untrack(c net.Conn) {
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

func (p *Proxy) openConns() int {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()
	return len(p.conns)
}

func (p *Proxy) closeAll() int {
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

// Ready reports nil when the proxy is ready for traffic: not draining, a
// valid certificate, and the first policy of every declared inbound port.
func (p *Proxy) Ready() error {
	if p.draining.Load() {
		return errors.New("dataplane: draining")
	}
	if !p.running.Load() {
		return errors.New("dataplane: not running")
	}
	if err := p.certificateOK(); err != nil {
		return err
	}
	for _, port := range p.cfg.InboundPorts.List() {
		if !p.state.Ports().Has(uint32(port)) {
			return fmt.Errorf("dataplane: no policy yet for port %d", port)
		}
	}
	return nil
}

// errNoOriginalDst means the connection was not redirected by netfilter.
var errNoOriginalDst = errors.New("dataplane: connection has no original destination")

// originalDstOf reads SO_ORIGINAL_DST from a TCP connection
// (internal/origdst).
func originalDstOf(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errNoOriginalDst
	}
	ap, err := origdst.Get(tc)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("dataplane: %w", err)
	}
	return ap, nil
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
