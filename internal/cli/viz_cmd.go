package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
	vizlocal "github.com/weftmesh/weft/mesh/viz/local"
)

// VizCommand is `weft viz`: stat, top, tap, edges, routes, authz and the
// web dashboard, read from the proxies themselves (no Prometheus needed)
// or from a Prometheus server. See docs/viz.md.
func VizCommand() Command {
	return Command{
		Name:    "viz",
		Summary: "observe the mesh: stat, top, tap, edges, routes, authz, dashboard (no Prometheus needed)",
		Long: "Data come from the proxies' own /metrics and tap: in a cluster through the\n" +
			"Kubernetes API server, in a local mesh (weft demo, weft dev) directly with --local DIR.\n" +
			"--prometheus URL queries a Prometheus server instead.",
		Sub: vizSubcommands(),
	}
}

func vizSubcommands() []Command {
	return []Command{
		{Name: "stat", Args: "[flags] TYPE[/NAME]", Summary: "golden metrics per namespace, workload, pod, authority or route", Setup: setupVizStat,
			Long: "TYPE: namespace (ns), deployment (deploy), statefulset (sts), daemonset (ds), job,\n" +
				"workload, pod (po), authority (au) or route (rt). Figures are what the resource served\n" +
				"(its proxies' inbound side)."},
		{Name: "edges", Args: "[flags] [TYPE]", Summary: "who calls whom, with the identities both proxies verified", Setup: setupVizEdges,
			Long: "Lists who called whom, with the client identity the server's proxy verified and the\n" +
				"server identity the client's proxy verified, and the calls policy denied."},
		{Name: "routes", Args: "[flags] TYPE/NAME", Summary: "golden metrics per route a workload serves (or calls, with --to)", Setup: setupVizRoutes,
			Long: "Routes are a Service's ServiceProfile routes; requests no route matched are [DEFAULT].\n" +
				"Without --to: the routes the workload serves. With --to svc/NAME (or NAME, or\n" +
				"NAME.NAMESPACE.svc.cluster.local, optionally :PORT): the routes it calls on that Service,\n" +
				"whichever address it dialled. --to IP:PORT selects traffic to an address that is no Service's.\n" +
				"--to egressnetwork/NAME (or egress/NAME): the traffic that left the mesh under that\n" +
				"EgressNetwork, per destination address, with its routes and its default route\n" +
				"(http-egress-allow or http-egress-deny)."},
		{Name: "authz", Args: "[flags] TYPE/NAME", Summary: "allowed and denied traffic per authorization, with the denied clients", Setup: setupVizAuthz},
		{Name: "tap", Args: "[flags] TYPE[/NAME]", Summary: "the live request stream of a workload's proxies", Setup: setupVizTap,
			Long: "Streams the requests the selected pods' proxies see, as they happen."},
		{Name: "top", Args: "[flags] TYPE[/NAME]", Summary: "the hottest paths now, from tap", Setup: setupVizTop,
			Long: "Shows the hottest paths of the selected pods' traffic now, from tap: redrawn every\n" +
				"second on a terminal, printed once at the end otherwise (--duration or Ctrl-C)."},
		{Name: "dashboard", Summary: "serve the live web dashboard", Setup: setupVizDashboard,
			Long: "Serves a web page with the mesh's topology, golden metrics, denials and a live tap.\n" +
				"In a cluster it shows every namespace unless -n names one (as Linkerd's dashboard)."},
	}
}

// vizFlags are the flags every viz command shares: where the data come
// from, which namespace, and the output format.
type vizFlags struct {
	local      string
	prometheus string
	kubeconfig string
	kubeCtx    string
	namespace  string
	all        bool
	output     string
}

func (f *vizFlags) register(fs *FlagSet, outputs string) {
	fs.StringVar(&f.local, "local", "", "read the local mesh (weft demo, weft dev) whose directory is DIR, directly on loopback")
	fs.StringVar(&f.prometheus, "prometheus", "", "query the Prometheus server at URL instead of the proxies")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeCtx, "context", "", "kubeconfig context")
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "namespace of the resource")
	fs.BoolVarP(&f.all, "all-namespaces", "A", false, "every namespace")
	fs.StringVarP(&f.output, "output", "o", "table", "output format: "+outputs)
}

func (f *vizFlags) validate(outputs ...string) error {
	ok := false
	for _, o := range outputs {
		ok = ok || f.output == o
	}
	if !ok {
		return fmt.Errorf("-o %q: want %s", f.output, strings.Join(outputs, " or "))
	}
	n := 0
	for _, s := range []string{f.local, f.prometheus} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("--local and --prometheus exclude each other")
	}
	return nil
}

func (f *vizFlags) ns() string {
	if f.all {
		return ""
	}
	return f.namespace
}

// source resolves the flags to where the proxies are read.
func (f *vizFlags) source() (viz.Source, error) {
	switch {
	case f.local != "":
		ts, err := vizlocal.FromDir(f.local)
		if err != nil {
			return nil, err
		}
		return vizlocal.DirSource(f.local, ts), nil
	case f.prometheus != "":
		return nil, errors.New("--prometheus does not read proxies")
	}
	return kubeVizSource(f)
}

// windowFlags choose the span a view covers.
type windowFlags struct {
	window     time.Duration
	sinceStart bool
}

func (w *windowFlags) register(fs *FlagSet) {
	fs.DurationVarP(&w.window, "window", "t", 10*time.Second, "span to measure: the proxies are read at its start and end (Ctrl-C ends it early); with --prometheus, the range of the queries")
	fs.BoolVar(&w.sinceStart, "since-start", false, "count everything since the proxies started instead (no rates)")
}

func (w *windowFlags) validate() error {
	if !w.sinceStart && (w.window < time.Second || w.window > 24*time.Hour) {
		return fmt.Errorf("--window %s: want 1s to 24h", w.window)
	}
	return nil
}

// collect returns the window the flags ask for, from the proxies or from
// Prometheus. It tells the user on stderr while it samples.
func collect(ctx context.Context, f *vizFlags, wf *windowFlags, stdio IO) (viz.Window, error) {
	if f.prometheus != "" {
		return prometheusWindow(ctx, f, wf)
	}
	src, err := f.source()
	if err != nil {
		return viz.Window{}, err
	}
	d := wf.window
	if wf.sinceStart {
		d = 0
	}
	return viz.Sample(ctx, src, d, func() {
		fmt.Fprintf(stdio.Stderr, "sampling the proxies for %s (Ctrl-C to stop early)...\n", d)
	})
}

// writeViz prints a view's object as JSON or YAML (-o json|yaml).
func writeViz(w io.Writer, format string, v any) {
	_ = writeObject(w, format, v)
}

// num returns v, or nil when it is NaN (JSON has no NaN).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func pctOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

func rpsOrDash(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1frps", v)
}

func msOrDash(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v < 10:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%.0fms", v)
}

func vizFail(stdio IO, cmd string, err error, status int) int {
	fmt.Fprintf(stdio.Stderr, "weft viz %s: %v\n", cmd, err)
	return status
}

// reportUnreachable names the targets that did not answer.
func reportUnreachable(w viz.Window, stdio IO) {
	for _, ts := range w.Targets {
		if ts.Err != nil {
			fmt.Fprintf(stdio.Stderr, "warning: %s did not answer: %v\n", ts.Target, ts.Err)
		}
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
