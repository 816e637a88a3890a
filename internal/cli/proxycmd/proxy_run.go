package proxycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/memlimit"
	"github.com/weftmesh/weft/mesh/dataplane/static"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

// ProxyInputs are what a proxy consumes besides its configuration.
type ProxyInputs struct {
	// Identity is required: the identity client.
	Identity dataplane.Identity
	// Resolver is the destination client (Destination.Get).
	Resolver dataplane.Resolver
	// Policies is the inbound policy client (InboundServerPolicies).
	Policies dataplane.InboundPolicies
	// OutboundPolicies is the outbound policy client (OutboundPolicies);
	// optional.
	OutboundPolicies dataplane.OutboundPolicies
	// Profiles is the profile client (Destination.GetProfile); optional.
	Profiles dataplane.Profiles
	// Cleanup, if set, is called when the proxy has stopped.
	Cleanup func()
}

// ProxySources builds the proxy's inputs from its settings.
type ProxySources func(ctx context.Context, env ProxyEnv, log *slog.Logger) (ProxyInputs, error)

// ProxyRunCommand is `weft-proxy run`: it reads the WEFT_PROXY_* settings
// (each also a flag, which wins), opens the listeners and runs the proxy
// until SIGTERM, then drains. sources wires the control-plane clients; with
// --static FILE the inputs come from a file instead (see
// mesh/dataplane/static). With neither, the command fails.
func ProxyRunCommand(sources ProxySources, opts ...RunOption) core.Command {
	var ro runOptions
	for _, o := range opts {
		o(&ro)
	}
	return core.Command{
		Name:    "run",
		Summary: "run the Weft proxy (settings from WEFT_PROXY_* variables or flags)",
		Long:    "Every setting is an environment variable and a flag; a flag wins.",
		Setup: func(fs *core.FlagSet) core.Action {
			return setupProxy(fs, os.LookupEnv, sources, ro)
		},
	}
}

// TracingStarter starts the proxy's tracer from its settings (called only
// when they name a collector), with the proxy's identity for mesh TLS to
// the collector. It returns the proxy option that hands requests to the
// tracer and the function that flushes and stops it once the proxy has
// drained. weft-proxy passes internal/cli/proxytrace.Start, so that the
// OpenTelemetry SDK is linked into that binary alone.
type TracingStarter func(ctx context.Context, cfg tracing.Config, id dataplane.Identity, log *slog.Logger) (dataplane.Option, func(), error)

// RunOption tunes `weft-proxy run`.
type RunOption func(*runOptions)

type runOptions struct {
	tracing TracingStarter
}

// WithTracing lets `weft-proxy run` trace requests with start when its
// settings name a collector; without it such a setting is refused.
func WithTracing(start TracingStarter) RunOption { return func(o *runOptions) { o.tracing = start } }

// runProxy runs `weft-proxy run` with args, reading the environment
// through lookup.
func runProxy(ctx context.Context, args []string, stdio core.IO, lookup func(string) (string, bool), sources ProxySources, opts ...RunOption) int {
	var ro runOptions
	for _, o := range opts {
		o(&ro)
	}
	c := ProxyRunCommand(sources)
	c.Setup = func(fs *core.FlagSet) core.Action { return setupProxy(fs, lookup, sources, ro) }
	return c.Run(ctx, args, stdio)
}

// flagName turns WEFT_PROXY_INBOUND_ADDR into inbound-addr.
func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "WEFT_PROXY_")), "_", "-")
}

func setupProxy(fs *core.FlagSet, lookup func(string) (string, bool), sources ProxySources, ro runOptions) core.Action {
	settings := ProxySettings()
	values := map[string]*string{}
	for _, s := range settings {
		values[s.Env] = fs.String(flagName(s.Env), "", fmt.Sprintf("%s (env %s, default %q)", s.Help, s.Env, s.Default))
	}
	staticFile := fs.String("static", "", "read identity, destinations and policies from this file instead of the control plane (development and tests)")
	return func(ctx context.Context, args []string, stdio core.IO) int {
		set := map[string]bool{}
		fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
		env, err := ReadProxyEnv(func(k string) (string, bool) {
			if set[flagName(k)] {
				return *values[k], true
			}
			return lookup(k)
		})
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
			return core.ExitUsage
		}
		if env.Trace.Enabled() && ro.tracing == nil {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %s is set, but this binary has no tracing\n", vocab.EnvTraceCollectorAddr)
			return core.ExitUsage
		}
		// The logger and the access log share stderr; one lock keeps their
		// lines whole.
		errw := &lockedWriter{w: stdio.Stderr}
		cfg := env.Proxy
		log, err := proxyLogger(env, errw)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
			return core.ExitUsage
		}
		applyMemoryLimit(log, lookup)

		var in ProxyInputs
		switch {
		case *staticFile != "":
			src, err := static.Load(*staticFile)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
				return core.ExitUsage
			}
			in = ProxyInputs{Identity: src.Identity, Resolver: src.Resolver, Policies: src.Policies,
				OutboundPolicies: src.OutboundPolicies, Profiles: src.Profiles}
		case sources != nil:
			in, err = sources(ctx, env, log)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
				return core.ExitFailure
			}
		default:
			fmt.Fprintln(stdio.Stderr, "weft-proxy: no control-plane clients are wired into this binary; use --static FILE")
			return core.ExitUsage
		}
		if in.Cleanup != nil {
			defer in.Cleanup()
		}
		if cfg.CPURatioLimit > 0 {
			// config.linkerd.io/proxy-cpu-ratio-limit: fewer worker threads
			// than Go would take from the container's CPU limit alone.
			n := dataplane.WorkerLimit(runtime.NumCPU(), runtime.GOMAXPROCS(0), cfg.CPURatioLimit)
			runtime.GOMAXPROCS(n)
			log.Info("worker threads capped by the CPU ratio limit", "gomaxprocs", n, "ratio", cfg.CPURatioLimit)
		}
		opts := []dataplane.Option{dataplane.WithLogger(log), dataplane.WithAccessLog(errw)}
		if env.Control.Pod != "" {
			// In a pod, loopback is the pod's own: its processes reach the
			// application whatever the policy, as with Linkerd's proxy.
			opts = append(opts, dataplane.WithLoopbackAllowed())
		}
		if in.OutboundPolicies != nil {
			opts = append(opts, dataplane.WithOutboundPolicies(in.OutboundPolicies))
		}
		if in.Profiles != nil {
			opts = append(opts, dataplane.WithProfiles(in.Profiles))
		}
		if env.Trace.Enabled() {
			opt, stopTracing, err := ro.tracing(ctx, env.Trace, in.Identity, log)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
				return core.ExitFailure
			}
			defer stopTracing() // after the proxy has drained: its last spans go out
			opts = append(opts, opt)
		}
		p, err := dataplane.New(ctx, cfg, in.Identity, in.Resolver, in.Policies, opts...)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
			return core.ExitFailure
		}
		ls, err := dataplane.Listen(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
			return core.ExitFailure
		}
		if err := p.Run(ctx, ls); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stdio.Stderr, "weft-proxy: %v\n", err)
			return core.ExitFailure
		}
		return core.ExitOK
	}
}

// applyMemoryLimit gives the Go runtime a soft memory limit of 90% of the
// container's (read once from the cgroup files), unless GOMEMLIMIT is set.
// A cgroup file it cannot read is reported and the proxy runs without a
// limit, as it would without a container limit.
func applyMemoryLimit(log *slog.Logger, lookup func(string) (string, bool)) {
	r, err := memlimit.Apply("/", memlimit.DefaultFraction, lookup, debug.SetMemoryLimit)
	switch {
	case err != nil:
		log.Warn("no Go memory limit derived from the container's", "err", err)
	case r.Limit > 0:
		log.Info("Go memory limit set from the container's", "limit_bytes", r.Limit, "container_bytes", r.Container, "file", r.Source)
	case r.Source != "":
		log.Debug("Go memory limit from GOMEMLIMIT")
	}
}

func proxyLogger(env ProxyEnv, w io.Writer) (*slog.Logger, error) {
	level, err := parseLogLevel(env.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if env.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// Commands lists weft-proxy's commands.
func Commands(opts ...RunOption) []core.Command {
	return []core.Command{
		ProxyRunCommand(ControlPlaneSources, opts...),
		ProxyAwaitCommand(),
		core.VersionCommand(),
	}
}

// lockedWriter serializes writes to one stream shared by several writers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
