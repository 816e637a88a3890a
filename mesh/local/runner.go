package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/identity/pki"
	idstatic "github.com/weftmesh/weft/mesh/identity/static"
)

// App is a workload's program run in-process: it is called once per pod
// after every proxy is ready, and must return when ctx ends (nil then).
// It listens on pod.IP at its ports and reaches its dependencies at
// pod.Mappings[i].Listen.
type App func(ctx context.Context, pod Pod) error

// Option tunes New.
type Option func(*options)

type options struct {
	log       *slog.Logger
	proxyLog  *slog.Logger
	apps      map[string]App
	processes bool
	stdout    io.Writer
	stderr    io.Writer
	bases     []netip.Addr
	tempDir   string
	grace     time.Duration
	readyWait time.Duration
	limits    grpclimit.Limits
}

// WithLogger sets the logger of the control plane and the runner (default:
// discard).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithServerLimits sets the limits of the control plane's gRPC servers
// (default: [DefaultServerLimits]).
func WithServerLimits(l grpclimit.Limits) Option { return func(o *options) { o.limits = l } }

// DefaultServerLimits are the limits of the local control plane's gRPC
// servers: those of `weft-controller` (grpclimit.Defaults), except that
// each per-peer cap equals its total, because every proxy of the local
// mesh connects to the controllers from 127.0.0.1 and so is the same peer.
func DefaultServerLimits() grpclimit.Limits {
	l := grpclimit.Defaults()
	l.MaxConnectionsPerPeer = l.MaxConnections
	l.MaxWatchesPerPeer = l.MaxWatches
	l.MaxRequestsPerPeer = l.MaxRequests
	return l
}

// WithProxyLogger sets the logger of the proxies (default: discard).
func WithProxyLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.proxyLog = l
		}
	}
}

// WithApp runs app for every pod of the named workload (NAME or
// NAMESPACE/NAME).
func WithApp(workload string, app App) Option {
	return func(o *options) { o.apps[workload] = app }
}

// WithProcesses starts each workload's Command (weft dev), one process per
// pod, with its output lines prefixed by the pod name.
func WithProcesses(stdout, stderr io.Writer) Option {
	return func(o *options) {
		o.processes = true
		o.stdout, o.stderr = stdout, stderr
	}
}

// WithAddressBase fixes the pods' /24 (base .1, .2, ...). By default the
// runner takes the first of 127.0.1.0, 127.0.2.0, ... 127.0.99.0 whose
// addresses are free.
func WithAddressBase(base netip.Addr) Option {
	return func(o *options) { o.bases = []netip.Addr{base} }
}

// WithTempDir sets where the runner's temporary directory is created
// (default os.TempDir()).
func WithTempDir(dir string) Option { return func(o *options) { o.tempDir = dir } }

// WithShutdownGracePeriod bounds how long the proxies drain open
// connections when the mesh stops (default 2s).
func WithShutdownGracePeriod(d time.Duration) Option { return func(o *options) { o.grace = d } }

// Runner runs a local mesh: control plane, one proxy per pod, and the
// programs. Build it with New and run it with Run.
type Runner struct {
	file  *File
	opts  options
	ready chan struct{}

	mu      sync.Mutex
	state   *State
	running bool
}

// State describes a running mesh; it is available after Ready.
type State struct {
	Dir          string
	Plan         *Plan
	ControlPlane ControlPlane
	TrustAnchors []byte
	Proxies      []*Proxy
	// Tap holds the tapper's credentials: every proxy serves tap on its
	// Pod.Tap address to TapperIdentity only (see tap.go).
	Tap *Tap
}

// Proxy is one pod's running proxy.
type Proxy struct {
	Pod   Pod
	proxy *dataplane.Proxy
}

// Registry is the proxy's metrics registry (what /metrics serves).
func (p *Proxy) Registry() *prometheus.Registry { return p.proxy.Registry() }

// Ready reports whether the proxy is ready (nil) or why not.
func (p *Proxy) Ready() error { return p.proxy.Ready() }

// New checks f and the options; nothing starts before Run. ctx bounds
// the start only (New fails if it has already ended); the mesh runs for
// the context given to Run.
func New(ctx context.Context, f *File, opts ...Option) (*Runner, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if f == nil {
		return nil, errors.New("local: mesh file is nil")
	}
	o := options{
		log:       slog.New(slog.DiscardHandler),
		proxyLog:  slog.New(slog.DiscardHandler),
		apps:      map[string]App{},
		grace:     2 * time.Second,
		readyWait: 30 * time.Second,
		limits:    DefaultServerLimits(),
	}
	for i := 1; i < 100; i++ {
		o.bases = append(o.bases, netip.AddrFrom4([4]byte{127, 0, byte(i), 0}))
	}
	for _, opt := range opts {
		opt(&o)
	}
	for name := range o.apps {
		if _, ok := f.lookup(name, f.Namespace); !ok {
			return nil, fmt.Errorf("local: app for %q: no such workload", name)
		}
	}
	for _, w := range f.Workloads {
		_, app := o.apps[w.Name]
		if !app {
			_, app = o.apps[w.Namespace+"/"+w.Name]
		}
		if app && o.processes && len(w.Command) > 0 {
			return nil, fmt.Errorf("local: workload %s has both an in-process app and a command", w.Name)
		}
	}
	if o.grace < 0 {
		return nil, fmt.Errorf("local: shutdown grace period %s is negative", o.grace)
	}
	if err := o.limits.Validate(); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &Runner{file: f, opts: o, ready: make(chan struct{})}, nil
}

// Ready is closed once every proxy is ready and the programs are starting.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

// State returns the running mesh, or nil before Ready.
func (r *Runner) State() *State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// Run starts the mesh and runs it until ctx ends (it then returns nil) or
// a part fails (it returns the error). Either way everything is stopped,
// programs first, then proxies, then the control plane, and the temporary
// directory is removed. A Runner runs once.
func (r *Runner) Run(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return errors.New("local: the runner has already run")
	}
	r.running = true
	r.mu.Unlock()
	log := r.opts.log

	dir, err := os.MkdirTemp(r.opts.tempDir, "weft-local-")
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	defer os.RemoveAll(dir)

	anchorPEM, issuer, err := writePKI(dir)
	if err != nil {
		return err
	}
	tapper, err := writeTapper(dir, issuer, anchorPEM)
	if err != nil {
		return err
	}
	plan, ls, err := r.place()
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	tokens, err := writeObjects(dir, plan)
	if err != nil {
		return err
	}
	for _, p := range r.file.PolicyPaths() {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("local: policyFiles: %w", err)
		}
	}

	run, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	base := context.WithoutCancel(ctx)

	cpCtx, stopCP := context.WithCancel(base)
	defer stopCP()
	cp, err := startControlPlane(cpCtx, dir, r.file, r.file.PolicyPaths(), r.opts.limits, log)
	if err != nil {
		return err
	}
	defer cp.stop()
	go func() {
		select {
		case err := <-cp.errc:
			cancelRun(err)
		case <-cpCtx.Done():
		}
	}()
	log.Info("control plane started", "identity", cp.addrs.Identity, "destination", cp.addrs.Destination, "policy", cp.addrs.Policy, "dir", dir)

	// Proxies.
	proxyCtx, stopProxies := context.WithCancel(base)
	defer stopProxies()
	var proxyWG sync.WaitGroup
	defer proxyWG.Wait()
	defer stopProxies() // runs before the Wait above
	state := &State{Dir: dir, Plan: plan, ControlPlane: cp.addrs, TrustAnchors: anchorPEM, Tap: tapper}
	for i, pod := range plan.Pods {
		p, err := r.startProxy(run, proxyCtx, &proxyWG, pod, ls[i], cp.addrs, anchorPEM, tokens[i], cancelRun)
		if err != nil {
			return err
		}
		ls[i] = nil // owned by the proxy now
		state.Proxies = append(state.Proxies, p)
	}
	if err := waitReady(run, state.Proxies, r.opts.readyWait); err != nil {
		if cause := context.Cause(run); cause != nil && !errors.Is(cause, context.Canceled) {
			return cause
		}
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	r.mu.Lock()
	r.state = state
	r.mu.Unlock()
	log.Info("mesh ready", "pods", len(plan.Pods))

	// Programs.
	appCtx, stopApps := context.WithCancel(base)
	defer stopApps()
	var appWG sync.WaitGroup
	for _, pod := range plan.Pods {
		app := r.opts.apps[pod.Workload]
		if app == nil {
			app = r.opts.apps[pod.Namespace+"/"+pod.Workload]
		}
		switch {
		case app != nil:
			appWG.Add(1)
			go func() {
				defer appWG.Done()
				if err := app(appCtx, pod); err != nil && appCtx.Err() == nil {
					cancelRun(fmt.Errorf("local: app of %s: %w", pod.Name, err))
				}
			}()
		case r.opts.processes && len(pod.Command) > 0:
			appWG.Add(1)
			go func() {
				defer appWG.Done()
				if err := runProcess(appCtx, pod, r.opts.stdout, r.opts.stderr, log); err != nil && appCtx.Err() == nil {
					cancelRun(err)
				}
			}()
		}
	}
	close(r.ready)

	<-run.Done()
	log.Info("mesh stopping")
	stopApps()
	appWG.Wait()
	stopProxies()
	proxyWG.Wait()
	stopCP()
	if cause := context.Cause(run); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// place picks the first address base whose listeners can all be opened
// and returns the plan with one set of listeners per pod.
func (r *Runner) place() (*Plan, []*podListeners, error) {
	var lastErr error
	for _, b := range r.opts.bases {
		plan, err := NewPlan(r.file, b)
		if err != nil {
			return nil, nil, err
		}
		ls, err := openAll(plan)
		if err == nil {
			return plan, ls, nil
		}
		lastErr = err
	}
	return nil, nil, fmt.Errorf("local: no free loopback addresses for the pods: %w", lastErr)
}

// podListeners are the sockets of one pod's proxy.
type podListeners struct {
	inbound, admin, tap net.Listener
	mapped              []dataplane.MappedListener
}

func (l *podListeners) Close() {
	if l == nil {
		return
	}
	for _, c := range []net.Listener{l.inbound, l.admin, l.tap} {
		if c != nil {
			c.Close()
		}
	}
	for _, m := range l.mapped {
		m.Listener.Close()
	}
}

func openAll(plan *Plan) (out []*podListeners, err error) {
	defer func() {
		if err != nil {
			for _, l := range out {
				l.Close()
			}
			out = nil
		}
	}()
	for _, pod := range plan.Pods {
		pl := &podListeners{}
		out = append(out, pl)
		if pl.inbound, err = net.Listen("tcp", pod.Inbound.String()); err != nil {
			return out, err
		}
		if pl.admin, err = net.Listen("tcp", pod.Admin.String()); err != nil {
			return out, err
		}
		if pl.tap, err = net.Listen("tcp", pod.Tap.String()); err != nil {
			return out, err
		}
		for _, m := range pod.Mappings {
			l, err := net.Listen("tcp", m.Listen.String())
			if err != nil {
				return out, err
			}
			pl.mapped = append(pl.mapped, dataplane.MappedListener{Listener: l, Authority: m.Authority})
		}
		// The programs bind their own ports: check that they are free.
		for _, p := range pod.Ports {
			l, err := net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(p.Port)).String())
			if err != nil {
				return out, err
			}
			l.Close()
		}
	}
	return out, nil
}

// writePKI creates the trust anchor and issuer in dir/identity and
// returns the anchor's PEM and the issuer.
func writePKI(dir string) ([]byte, *pki.KeyPair, error) {
	anchor, err := pki.NewAnchor(pki.Options{Lifetime: 7 * 24 * time.Hour})
	if err != nil {
		return nil, nil, fmt.Errorf("local: trust anchor: %w", err)
	}
	issuer, err := pki.NewIssuer(anchor, pki.Options{Lifetime: 7 * 24 * time.Hour})
	if err != nil {
		return nil, nil, fmt.Errorf("local: issuer: %w", err)
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{"identity/ca.crt", anchor.CertPEM, 0o644},
		{"identity/issuer/crt.pem", issuer.CertPEM, 0o644},
		{"identity/issuer/key.pem", issuer.KeyPEM, 0o600},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, nil, fmt.Errorf("local: %w", err)
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return nil, nil, fmt.Errorf("local: %w", err)
		}
	}
	// The anchor key is not needed once the issuer exists; it is not kept.
	return anchor.CertPEM, issuer, nil
}

// writeObjects writes the manifests and one token per pod, and returns the
// token file of each pod.
func writeObjects(dir string, plan *Plan) ([]string, error) {
	manifests, err := plan.YAML()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "manifests"), 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "mesh.yaml"), manifests, 0o600); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tokens"), 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	var entries []idstatic.Entry
	var files []string
	for _, pod := range plan.Pods {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("local: token: %w", err)
		}
		tok := hex.EncodeToString(b)
		entries = append(entries, idstatic.Entry{Token: tok, Namespace: pod.Namespace, ServiceAccount: pod.ServiceAccount})
		p := filepath.Join(dir, "tokens", pod.Namespace+"."+pod.Name)
		if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		files = append(files, p)
	}
	data, err := yaml.Marshal(struct {
		Tokens []idstatic.Entry `json:"tokens"`
	}{entries})
	if err != nil {
		return nil, fmt.Errorf("local: tokens: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.yaml"), data, 0o600); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return files, nil
}

// ProxyConfig is the configuration of a pod's proxy in explicit mode: its
// own settings, and the control plane and workload it connects with.
func ProxyConfig(pod Pod, cp ControlPlane, anchors []byte, tokenFile, defaultPolicy string) (dataplane.Config, control.Config) {
	cfg := dataplane.DefaultConfig()
	cfg.InboundAddr = pod.Inbound.String()
	cfg.AdminAddr = pod.Admin.String()
	cfg.OutboundAddr = ""
	for _, m := range pod.Mappings {
		cfg.Mappings = append(cfg.Mappings, dataplane.Mapping{Listen: m.Listen.String(), Authority: m.Authority})
	}
	cfg.InboundForwardHost = pod.IP.String()
	// Loopback is shared here: other pods' proxies, the control plane and
	// whatever else runs on the machine listen beside the program, so a
	// peer's transport header may name only the program's own ports (none
	// for a workload without ports).
	cfg.InboundPortsOnly = true
	cfg.DefaultInboundPolicy = defaultPolicy
	cfg.ClusterNetworks = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	cfg.TapAddr = pod.Tap.String()
	cfg.TapIdentities = []string{TapperIdentity}
	for _, p := range pod.Ports {
		pr, _ := dataplane.ParsePorts(fmt.Sprint(p.Port))
		cfg.InboundPorts = append(cfg.InboundPorts, pr...)
		if p.Opaque {
			cfg.InboundOpaquePorts = append(cfg.InboundOpaquePorts, pr...)
		}
	}
	cc := control.Config{
		IdentityAddr:       cp.Identity,
		DestinationAddr:    cp.Destination,
		PolicyAddr:         cp.Policy,
		TrustAnchorsPEM:    anchors,
		IdentityTokenFile:  tokenFile,
		IdentityName:       pod.Identity,
		DestinationContext: fmt.Sprintf(`{"ns":%q,"pod":%q}`, pod.Namespace, pod.Name),
		Namespace:          pod.Namespace,
		Pod:                pod.Name,
		ServiceAccount:     pod.ServiceAccount,
	}
	return cfg, cc
}

func (r *Runner) startProxy(run, ctx context.Context, wg *sync.WaitGroup, pod Pod, ls *podListeners, cp ControlPlane, anchors []byte, tokenFile string, fail context.CancelCauseFunc) (*Proxy, error) {
	cfg, cc := ProxyConfig(pod, cp, anchors, tokenFile, r.file.DefaultInboundPolicy)
	cfg.ShutdownGracePeriod = r.opts.grace
	plog := r.opts.proxyLog.With("pod", pod.Namespace+"/"+pod.Name)
	cctx, cancel := context.WithTimeout(run, r.opts.readyWait)
	defer cancel()
	src, err := control.Connect(cctx, cc, control.WithExplicitMode(InboundPort), control.WithLogger(plog))
	if err != nil {
		return nil, fmt.Errorf("local: proxy of %s: %w", pod.Name, err)
	}
	p, err := dataplane.New(ctx, cfg, src.Identity, src.Resolver, src.Policies, dataplane.WithLogger(plog),
		dataplane.WithOutboundPolicies(src.OutboundPolicies), dataplane.WithProfiles(src.Profiles))
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("local: proxy of %s: %w", pod.Name, err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer src.Close()
		err := p.Run(ctx, dataplane.Listeners{Inbound: ls.inbound, Admin: ls.admin, Tap: ls.tap, Mapped: ls.mapped})
		if err != nil && !errors.Is(err, context.Canceled) {
			fail(fmt.Errorf("local: proxy of %s: %w", pod.Name, err))
		}
	}()
	return &Proxy{Pod: pod, proxy: p}, nil
}

// waitReady polls the proxies until all are ready.
func waitReady(ctx context.Context, ps []*Proxy, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var notReady []string
		for _, p := range ps {
			if err := p.Ready(); err != nil {
				notReady = append(notReady, fmt.Sprintf("%s: %v", p.Pod.Name, err))
			}
		}
		if len(notReady) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(notReady)
			return fmt.Errorf("local: proxies not ready after %s: %v", limit, notReady)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// DefaultAddressBase is the first /24 the runner tries for pod addresses.
var DefaultAddressBase = netip.AddrFrom4([4]byte{127, 0, 1, 0})
