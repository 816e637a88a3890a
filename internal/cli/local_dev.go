package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/weftmesh/weft/mesh/local"
	vizlocal "github.com/weftmesh/weft/mesh/viz/local"
)

// DevCommand is `weft dev --config FILE`: the local mesh of weft demo for
// the user's own programs, described by a mesh file (docs/local-mesh.md).
func DevCommand() Command {
	return Command{
		Name:    "dev",
		Summary: "run your own programs in a local mesh described by a mesh file",
		Setup:   setupDev,
	}
}

func setupDev(fs *FlagSet) Action {
	config := fs.String("config", "", "mesh file (required; see docs/local-mesh.md)")
	printObjects := fs.Bool("print-objects", false, "print the Kubernetes objects the mesh file expands to and exit")
	logLevel := fs.String("log-level", "info", "log level of the control plane and runner: debug, info, warn or error")
	proxyLogLevel := fs.String("proxy-log-level", "warn", "log level of the proxies: debug, info, warn or error")
	dash := fs.String("dashboard", "", "serve the live web dashboard on ADDR, such as 127.0.0.1:50750 (no authentication: keep it on loopback)")
	return func(ctx context.Context, args []string, stdio IO) int {
		if *config == "" || len(args) != 0 {
			fmt.Fprintln(stdio.Stderr, "weft dev: --config FILE is required and no arguments are taken")
			return ExitUsage
		}
		f, err := local.Load(*config)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft dev: %v\n", err)
			return ExitUsage
		}
		if *printObjects {
			plan, err := local.NewPlan(f, local.DefaultAddressBase)
			if err == nil {
				var out []byte
				if out, err = plan.YAML(); err == nil {
					_, _ = stdio.Stdout.Write(out)
					return ExitOK
				}
			}
			fmt.Fprintf(stdio.Stderr, "weft dev: %v\n", err)
			return ExitFailure
		}
		logger, err := newLogger(stdio.Stderr, *logLevel)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft dev: %v\n", err)
			return ExitUsage
		}
		proxyLogger, err := newLogger(stdio.Stderr, *proxyLogLevel)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft dev: --proxy-%v\n", strings.TrimPrefix(err.Error(), "--"))
			return ExitUsage
		}
		r, err := local.New(ctx, f, local.WithProcesses(stdio.Stdout, stdio.Stderr),
			local.WithLogger(logger), local.WithProxyLogger(proxyLogger))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft dev: %v\n", err)
			return ExitUsage
		}
		var dashL net.Listener
		if *dash != "" {
			if dashL, err = listenDashboard(*dash); err != nil {
				fmt.Fprintf(stdio.Stderr, "weft dev: --dashboard: %v\n", err)
				return ExitUsage
			}
			defer dashL.Close()
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		select {
		case <-r.Ready():
			st := r.State()
			fmt.Fprint(stdio.Stdout, devHeader(st))
			if dashL != nil {
				dctx, stop := context.WithCancel(ctx)
				d, derr := localDashboard(dctx, vizlocal.Source(st), vizlocal.NewExplainer(st))
				if derr != nil {
					stop()
					fmt.Fprintf(stdio.Stderr, "weft dev: dashboard: %v\n", derr)
					return ExitFailure
				}
				url, dashDone := serveDashboard(dctx, dashL, d)
				defer func() { stop(); <-dashDone }()
				fmt.Fprintf(stdio.Stdout, "dashboard: %s\n", url)
			}
			err = <-done
		case err = <-done:
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stdio.Stderr, "weft dev: %v\n", err)
			return ExitFailure
		}
		return ExitOK
	}
}

func devHeader(st *local.State) string {
	var b strings.Builder
	fmt.Fprintf(&b, "weft dev: mesh ready (files under %s; Ctrl-C stops everything)\n", st.Dir)
	fmt.Fprintf(&b, "observe it: weft viz stat deploy -A --local %s (also edges, routes, authz, tap, top, dashboard)\n", st.Dir)
	fmt.Fprintf(&b, "control plane: identity %s, destination %s, policy %s\n", st.ControlPlane.Identity, st.ControlPlane.Destination, st.ControlPlane.Policy)
	for _, p := range st.Plan.Pods {
		fmt.Fprintf(&b, "  %s/%s  ip %s  identity %s  admin http://%s/metrics\n", p.Namespace, p.Name, p.IP, p.Identity, p.Admin)
		for _, m := range p.Mappings {
			fmt.Fprintf(&b, "      %s -> %s\n", m.Listen, m.Authority)
		}
	}
	return b.String()
}
