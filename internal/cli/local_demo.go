package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/weftmesh/weft/mesh/local/demo"
	vizlocal "github.com/weftmesh/weft/mesh/viz/local"
)

// DemoCommand is `weft demo`: a whole mesh on this machine (control plane,
// one proxy per workload, sample programs, a policy that denies one caller)
// with a live view, until Ctrl-C or --duration. See docs/local-mesh.md.
func DemoCommand() Command {
	return Command{
		Name:    "demo",
		Summary: "run a whole demo mesh on this machine: mTLS, discovery, policy, live view",
		Long: "Runs identity, destination and policy, a frontend, a backend, a traffic client and an\n" +
			"intruder, each behind its own proxy, on loopback addresses 127.0.N.x. Nothing is\n" +
			"written outside a temporary directory, which is removed at the end.",
		Setup: setupDemo,
	}
}

func setupDemo(fs *FlagSet) Action {
	duration := fs.Duration("duration", 0, "stop after this long (default: run until Ctrl-C)")
	interval := fs.Duration("interval", 0, "time between two views (default 1s)")
	rate := fs.Float64("rate", 25, "requests per second of the traffic client")
	plain := fs.Bool("plain", false, "print plain lines even on a terminal")
	verbose := fs.Bool("verbose", false, "log the control plane and proxies to stderr")
	printFile := fs.Bool("print-mesh-file", false, "print the demo's mesh file (for weft dev) and exit")
	dash := fs.String("dashboard", "", "serve the live web dashboard on ADDR, such as 127.0.0.1:50750 (no authentication: keep it on loopback)")
	return func(ctx context.Context, args []string, stdio IO) int {
		if len(args) != 0 {
			fmt.Fprintf(stdio.Stderr, "weft demo: unexpected argument %q\n", args[0])
			return ExitUsage
		}
		if *printFile {
			_, _ = stdio.Stdout.Write(demo.MeshFile())
			return ExitOK
		}
		if *duration < 0 || *interval < 0 {
			fmt.Fprintln(stdio.Stderr, "weft demo: --duration and --interval must not be negative")
			return ExitUsage
		}
		if *rate < 0.1 || *rate > 500 {
			fmt.Fprintf(stdio.Stderr, "weft demo: --rate %g: want 0.1 to 500 requests per second\n", *rate)
			return ExitUsage
		}
		cfg := demo.Config{
			Out:      stdio.Stdout,
			TTY:      !*plain && isTerminal(stdio.Stdout),
			Duration: *duration,
			Interval: *interval,
			Rate:     *rate,
		}
		if *verbose {
			cfg.Logger = slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			cfg.ProxyLogger = cfg.Logger
		}
		var dashDone <-chan error
		if *dash != "" {
			l, err := listenDashboard(*dash)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft demo: --dashboard: %v\n", err)
				return ExitUsage
			}
			defer l.Close()
			dctx, stop := context.WithCancel(ctx)
			defer func() {
				stop()
				if dashDone != nil {
					<-dashDone
				}
			}()
			cfg.OnReady = func(live demo.Live) {
				d, err := localDashboard(dctx, vizlocal.Source(live.State), vizlocal.NewExplainer(live.State))
				if err != nil {
					fmt.Fprintf(stdio.Stderr, "weft demo: dashboard: %v\n", err)
					return
				}
				var url string
				url, dashDone = serveDashboard(dctx, l, d)
				fmt.Fprintf(stdio.Stderr, "weft demo: dashboard at %s\n", url)
			}
		}
		sum, err := demo.Run(ctx, cfg)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return ExitOK
			}
			fmt.Fprintf(stdio.Stderr, "weft demo: %v\n", err)
			return ExitFailure
		}
		if !sum.OK() && ctx.Err() == nil {
			fmt.Fprintln(stdio.Stderr, "weft demo: the run did not show traffic over mutual TLS and a denied request; rerun with --verbose")
			return ExitFailure
		}
		return ExitOK
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
