package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/dataplane/internal/accesslog"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/l4"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	"github.com/weftmesh/weft/mesh/dataplane/internal/origdst"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Values of the direction label of the proxy's metrics.
const (
	Inbound  = connmetrics.Inbound
	Outbound = connmetrics.Outbound
)

// Proxy is the Weft data plane for one workload. Build it with New and run
// it with Run, giving it the listeners it serves.
type Proxy struct {
	cfg Config
	id  Identity
	log *slog.Logger
	reg *prometheus.Registry
	m   *connmetrics.Set
	tap *tap.Hub
	now func() time.Time

	hasPolicies bool // an inbound policy source: Run fetches the declared ports' policies

	state *meshstate.State // destinations, port policies, peers' Services' profiles (internal/meshstate)
	paths *l4.Paths        // the connection paths (internal/l4)

	running  atomic.Bool
	draining atomic.Bool
	// runCtx is Run's context. The state's watches run under it: they
	// start only for connections, which Run accepts after setting it.
	runCtx context.Context
	stop   context.CancelFunc // set by Run; /shutdown calls it
	stopMu sync.Mutex
}

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
	p := &Proxy{cfg: cfg, id: id, log: o.log, reg: o.reg, m: m, tap: hub, now: o.now, hasPolicies: policies != nil}
	var access *accesslog.Log
	if cfg.AccessLog != "" {
		if o.accessLog == nil {
			return nil, errors.New("dataplane: an access log format is set but no writer (WithAccessLog)")
		}
		if access, err = accesslog.New(cfg.AccessLog, o.accessLog, o.now); err != nil {
			return nil, err
		}
	}
	p.state = meshstate.New(meshstate.Settings{
		Resolver: resolver, Policies: policies, OutPolicies: o.outPolicies, Profiles: o.profiles,
		Lifetime:       func() context.Context { return p.runCtx },
		ResolveTimeout: cfg.ResolveTimeout, PolicyTimeout: cfg.PolicyTimeout, DestIdle: o.destIdle,
		DefaultPolicy: &meshstate.Policy{Proto: authz.ToProto(def), Srv: def}, DefaultName: cfg.DefaultInboundPolicy,
		Compile: compilePolicy, DenyAll: denyAllPolicy, NotFound: ErrNotFound,
		Sweep:   func() { p.paths.SweepPools() },
		Metrics: m, Log: o.log, Now: o.now,
	})
	p.paths, err = l4.New(pathsConfig(cfg), l4.Settings{
		Identity:     id,
		ServerTLS:    ServerTLSConfig(id, o.now),
		ClientTLS:    func(serverID string) *tls.Config { return ClientTLSConfig(id, serverID, o.now) },
		PeerIdentity: PeerIdentity,
		State:        p.state, Metrics: m, Tap: hub, Access: access, Tracer: o.tracer, Log: o.log, Now: o.now,
		OrigDst: o.origDst, Loopback: o.loopback,
		HasResolver: resolver != nil, HasPolicies: policies != nil,
		NoGRPCFrames: o.noGRPCFrames, OnGRPCFrame: o.onGRPCFrame, OnGRPCOutFrame: o.onGRPCOutFrame,
	})
	if err != nil {
		return nil, err
	}
	for _, addr := range []string{cfg.InboundAddr, cfg.OutboundAddr, cfg.ConnectAddr, cfg.AdminAddr} {
		p.paths.Own(configuredPort(addr))
	}
	for _, m := range cfg.Mappings {
		p.paths.Own(configuredPort(m.Listen))
	}
	if len(cfg.TapIdentities) > 0 { // as Listen: the tap port is open only then
		p.paths.Own(configuredPort(cfg.TapAddr))
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
		p.paths.Own(listenerPort(l))
	}

	// Policies of the declared ports are fetched up front: readiness waits
	// for them. Without a policy source there is nothing to fetch (every
	// port has the default policy).
	if p.hasPolicies {
		for _, port := range p.cfg.InboundPorts.List() {
			p.state.Ports().Start(uint32(port))
		}
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

	mapped := make([]l4.Mapped, 0, len(ls.Mapped))
	for _, m := range ls.Mapped {
		mapped = append(mapped, l4.Mapped{Listener: m.Listener, Authority: m.Authority})
	}
	stopAccepting := p.paths.Accept(runCtx, l4.Listeners{Inbound: ls.Inbound, Outbound: ls.Outbound, Connect: ls.Connect, Mapped: mapped})
	p.log.Info("proxy started", "inbound", addrOf(ls.Inbound), "outbound", addrOf(ls.Outbound),
		"connect", addrOf(ls.Connect), "admin", addrOf(ls.Admin), "mappings", len(ls.Mapped))

	<-runCtx.Done()

	// Drain. Taps end at once: they observe traffic, they are not traffic.
	p.draining.Store(true)
	stopTap()
	<-tapDone
	stopAccepting()
	p.paths.Drain()
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

// Ready reports nil when the proxy is ready for traffic: not draining, a
// valid certificate, and the first policy of every declared inbound port.
func (p *Proxy) Ready() error {
	if p.draining.Load() {
		return errors.New("dataplane: draining")
	}
	if !p.running.Load() {
		return errors.New("dataplane: not running")
	}
	if err := p.paths.CertificateOK(); err != nil {
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

// pathsConfig is what the connection paths (internal/l4) read of cfg.
func pathsConfig(cfg Config) l4.Config {
	return l4.Config{
		InboundForwardHost:     cfg.InboundForwardHost,
		DetectTimeout:          cfg.DetectTimeout,
		InboundDetectTimeout:   cfg.InboundDetectTimeout,
		OutboundDetectTimeout:  cfg.OutboundDetectTimeout,
		ConnectTimeout:         cfg.ConnectTimeout,
		InboundConnectTimeout:  cfg.InboundConnectTimeout,
		ShutdownGracePeriod:    cfg.ShutdownGracePeriod,
		InboundPorts:           cfg.InboundPorts,
		InboundOpaquePorts:     cfg.InboundOpaquePorts,
		InboundSkipPorts:       cfg.InboundSkipPorts,
		OutboundSkipPorts:      cfg.OutboundSkipPorts,
		RequireIdentityPorts:   cfg.RequireIdentityPorts,
		InboundPortsOnly:       cfg.InboundPortsOnly,
		OutboundSendBuffer:     cfg.OutboundSendBuffer,
		HTTPIdleTimeout:        cfg.HTTPIdleTimeout,
		HTTPHeaderTimeout:      cfg.HTTPHeaderTimeout,
		HTTPMaxHeaderBytes:     cfg.HTTPMaxHeaderBytes,
		HTTPPoolWaitTimeout:    cfg.HTTPPoolWaitTimeout,
		HTTP1OverH2:            cfg.HTTP1OverH2,
		H2MaxConcurrentStreams: cfg.H2MaxConcurrentStreams,
		H2StreamWindow:         cfg.H2StreamWindow,
		H2InitialStreamWindow:  cfg.H2InitialStreamWindow,
		H2ConnectionWindow:     cfg.H2ConnectionWindow,
		H2ResetBudget:          cfg.H2ResetBudget,
		H2BufferLimit:          cfg.H2BufferLimit,
		H2WriteTimeout:         cfg.H2WriteTimeout,
	}
}
