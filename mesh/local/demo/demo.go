package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/local"
)

//go:embed demo.yaml
var meshFile []byte

// MeshFile returns the demo's mesh file (see docs/local-mesh.md for the
// format).
func MeshFile() []byte { return append([]byte(nil), meshFile...) }

// Config tunes Run.
type Config struct {
	// Out receives the live view and the summary (required).
	Out io.Writer
	// TTY redraws the view in place with ANSI escapes; otherwise plain
	// lines are printed.
	TTY bool
	// Duration stops the demo after this long; 0 runs until ctx ends.
	Duration time.Duration
	// Interval between two views (default 1s).
	Interval time.Duration
	// Rate is the traffic client's requests per second (default 25); the
	// intruder tries twice a second.
	Rate float64
	// Logger receives the control plane's logs, ProxyLogger the proxies'
	// (default: discard).
	Logger, ProxyLogger *slog.Logger
	// Options are passed to the runner (such as local.WithAddressBase).
	Options []local.Option
	// TrafficGate and IntruderGate, when set, pace the traffic client and
	// the intruder: one request per permit instead of Rate (tests).
	TrafficGate, IntruderGate *Gate
	// OnReady is called once the mesh is ready, before the first view,
	// with the running mesh and the programs' own counters (the
	// dashboard of `weft demo --dashboard` starts there).
	OnReady func(Live)
}

// Live is a running demo: the mesh and the counters its programs keep.
type Live struct {
	State *local.State
	Stats *Stats
}

// Run runs the demo mesh, shows the live view until ctx ends or Duration
// passes, stops everything and returns the summary (also written to Out).
func Run(ctx context.Context, cfg Config) (Summary, error) {
	if cfg.Out == nil {
		return Summary{}, errors.New("demo: Config.Out is required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Rate == 0 {
		cfg.Rate = 25
	}
	if cfg.Rate < 0.1 || cfg.Rate > 500 {
		return Summary{}, fmt.Errorf("demo: rate %g: want 0.1 to 500 requests per second", cfg.Rate)
	}
	if cfg.Duration < 0 {
		return Summary{}, fmt.Errorf("demo: duration %s is negative", cfg.Duration)
	}
	f, err := local.Parse("demo.yaml", meshFile)
	if err != nil {
		return Summary{}, fmt.Errorf("demo: %w", err)
	}
	stats := NewStats(nil)
	a := &apps{stats: stats, rate: cfg.Rate}
	a.serversUp.Add(2)
	opts := []local.Option{
		local.WithApp("backend", a.backend),
		local.WithApp("frontend", a.frontend),
		local.WithApp("traffic", a.caller("traffic", cfg.Rate, true, cfg.TrafficGate)),
		local.WithApp("intruder", a.caller("intruder", 2, false, cfg.IntruderGate)),
		local.WithLogger(cfg.Logger),
		local.WithProxyLogger(cfg.ProxyLogger),
	}
	r, err := local.New(ctx, f, append(opts, cfg.Options...)...)
	if err != nil {
		return Summary{}, fmt.Errorf("demo: %w", err)
	}

	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	select {
	case <-r.Ready():
	case err := <-done:
		if err == nil {
			err = errors.New("the mesh stopped before it was ready")
		}
		return Summary{}, fmt.Errorf("demo: %w", err)
	case <-ctx.Done():
		stop()
		<-done
		return Summary{}, ctx.Err()
	}
	st := r.State()
	if cfg.OnReady != nil {
		cfg.OnReady(Live{State: st, Stats: stats})
	}
	start := time.Now()
	header := Header(st)
	// On a terminal each view clears the screen and redraws the header and
	// the table from the top.
	const redraw = "\x1b[H\x1b[2J"
	if cfg.TTY {
		fmt.Fprint(cfg.Out, redraw+header)
	} else {
		fmt.Fprint(cfg.Out, header)
	}

	var deadline <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	var runErr error
loop:
	for {
		select {
		case <-tick.C:
			fr := frame(st, stats, time.Since(start))
			if cfg.TTY {
				fmt.Fprint(cfg.Out, redraw+header+"\n"+RenderTable(fr))
			} else {
				fmt.Fprint(cfg.Out, RenderLines(fr))
			}
		case <-deadline:
			break loop
		case <-ctx.Done():
			break loop
		case runErr = <-done:
			break loop
		}
	}
	// The callers' last requests are let finish before the final figures
	// are read (at most the callers' 5 s client timeout).
	a.quiesce(callerTimeout + time.Second)
	final := frame(st, stats, time.Since(start))
	stop()
	if runErr == nil {
		runErr = <-done
	}
	sum := NewSummary(final)
	if cfg.TTY {
		fmt.Fprint(cfg.Out, redraw+header+"\n"+RenderTable(final))
	}
	fmt.Fprint(cfg.Out, RenderSummary(sum))
	fmt.Fprintln(cfg.Out, "stopped: control plane, proxies and programs; temporary directory removed")
	if runErr != nil {
		return sum, fmt.Errorf("demo: %w", runErr)
	}
	return sum, nil
}

// frame gathers the programs' figures and the proxies' metrics.
func frame(st *local.State, stats *Stats, elapsed time.Duration) Frame {
	figs := map[string]Figures{}
	for _, f := range stats.Snapshot(elapsed) {
		figs[f.Workload] = f
	}
	proxies := map[string]ProxyFigures{}
	calls := map[string][]string{}
	var order []string
	for _, p := range st.Proxies {
		w := p.Pod.Workload
		mfs, err := p.Registry().Gather()
		if err != nil {
			continue
		}
		cur, seen := proxies[w]
		if !seen {
			order = append(order, w)
			cur = ProxyFigures{Workload: w}
			for _, m := range p.Pod.Mappings {
				_, name, _ := strings.Cut(m.Service, "/")
				calls[w] = append(calls[w], name)
			}
		}
		proxies[w] = cur.Merge(ReadProxy(w, mfs))
	}
	fr := Frame{Elapsed: elapsed}
	for _, w := range order {
		f := figs[w]
		f.Workload = w
		fr.Rows = append(fr.Rows, Row{Figures: f, Proxy: proxies[w], Calls: calls[w]})
	}
	return fr
}

// Header describes the running mesh: the control plane, each pod with its
// address and identity, and the policy.
func Header(st *local.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "weft demo: a whole mesh on this machine (loopback only, files under %s)\n", st.Dir)
	fmt.Fprintf(&b, "control plane: identity %s, destination %s, policy %s\n", st.ControlPlane.Identity, st.ControlPlane.Destination, st.ControlPlane.Policy)
	for _, p := range st.Plan.Pods {
		fmt.Fprintf(&b, "  %-10s pod %-12s proxy inbound %s admin http://%s/metrics  identity %s\n", p.Workload, p.IP, p.Inbound, p.Admin, p.Identity)
	}
	fmt.Fprintf(&b, "observe it from another terminal: weft viz stat deploy -n demo --local %s (also edges, routes, authz, tap, top)\n", st.Dir)
	for _, pol := range st.Plan.File.Policies {
		fmt.Fprintf(&b, "policy: %s port %s allows only %s (mutual TLS); every other caller is denied\n", pol.Workload, pol.Port.String(), strings.Join(pol.Allow, ", "))
	}
	return b.String()
}
