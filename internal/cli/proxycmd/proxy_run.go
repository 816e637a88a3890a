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

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/memlimit"
	"github.com/weftmesh/weft/mesh/dataplane/static"
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
func ProxyRunCommand(sources ProxySources) core.Command {
	return core.Command{
		Name:    "run",
		Summary: "run the Weft proxy (settings from WEFT_PROXY_* variables or flags)",
		Long:    "Every setting is an environment variable and a flag; a flag wins.",
		Setup: func(fs *core.FlagSet) core.Action {
			return setupProxy(fs, os.LookupEnv, sources)
		},
	}
}

// runProxy runs `weft-proxy run` with args, reading the environment
// through lookup.
func runProxy(ctx context.Context, args []string, stdio core.IO, lookup func(string) (string, bool), sources ProxySources) int {
	c := ProxyRunCommand(sources)
	c.Setup = func(fs *core.FlagSet) core.Action { return setupProxy(fs, lookup, sources) }
	return c.Run(ctx, args, stdio)
}

// flagName turns WEFT_PROXY_INBOUND_ADDR into inbound-addr.
func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "WEFT_PROXY_")), "_", "-")
}

func setupProxy(fs *core.FlagSet, lookup func(string) (string, bool), sources ProxySources) core.Action {
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
func Commands() []core.Command {
	return []core.Command{
		ProxyRunCommand(ControlPlaneSources),
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
