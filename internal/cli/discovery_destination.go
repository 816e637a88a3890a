package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/discovery"
	discoveryk8s "github.com/weftmesh/weft/mesh/discovery/kubernetes"
	discoverystatic "github.com/weftmesh/weft/mesh/discovery/static"
	"github.com/weftmesh/weft/mesh/grpclimit"
)

// DestinationControllerCommand is `weft-controller destination`: the
// Destination service (io.linkerd.proxy.destination.Destination) over
// Kubernetes or over manifest files, plaintext gRPC with health and
// server reflection.
func DestinationControllerCommand() Command {
	return Command{
		Name:    "destination",
		Summary: "run the destination service (endpoint and profile discovery)",
		Setup:   setupDestinationController,
	}
}

type destinationFlags struct {
	addr, metricsAddr string
	source            string
	manifests         StringList
	kubeconfig        string
	clusterDomain     string
	trustDomain       string
	cpNamespace       string
	opaquePorts       string
	server            serverLimitFlags
	logLevel          string
}

func setupDestinationController(fs *FlagSet) Action {
	var f destinationFlags
	fs.StringVar(&f.addr, "addr", ":8086", "HOST:PORT to serve gRPC on")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "HOST:PORT to serve /metrics, /live and /ready on (off when empty)")
	fs.StringVar(&f.source, "source", "kubernetes", "where endpoints come from: kubernetes or static")
	fs.Var(&f.manifests, "manifests", "static source: manifest file or directory, repeatable (followed for changes)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubernetes source: kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	fs.StringVar(&f.trustDomain, "trust-domain", "cluster.local", "trust domain of identity names")
	fs.StringVar(&f.cpNamespace, "control-plane-namespace", "weft", "control-plane namespace in identity names")
	core.RegisterDefaultOpaquePorts(fs, &f.opaquePorts)
	f.server.register(fs)
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	return func(ctx context.Context, args []string, stdio IO) int {
		fail := func(status int, err error) int {
			fmt.Fprintf(stdio.Stderr, "weft-controller destination: %v\n", err)
			return status
		}
		if len(args) != 0 {
			return fail(ExitUsage, errors.New("no positional arguments are taken"))
		}
		switch f.source {
		case "static":
			if len(f.manifests) == 0 {
				return fail(ExitUsage, errors.New("--source static needs --manifests FILE_OR_DIR"))
			}
		case "kubernetes":
			if len(f.manifests) != 0 {
				return fail(ExitUsage, errors.New("--manifests is for --source static"))
			}
		default:
			return fail(ExitUsage, fmt.Errorf("--source %q: want kubernetes or static", f.source))
		}
		if _, err := f.server.limits(); err != nil {
			return fail(ExitUsage, err)
		}
		opaque, err := core.ParseDefaultOpaquePorts(f.opaquePorts)
		if err != nil {
			return fail(ExitUsage, err)
		}
		logger, err := destinationLogger(stdio.Stderr, f.logLevel)
		if err != nil {
			return fail(ExitUsage, err)
		}
		reg := newRegistry()
		metrics, err := discovery.NewPrometheusMetrics(reg)
		if err != nil {
			return fail(ExitFailure, err)
		}
		idx, err := discovery.NewIndex(
			discovery.WithClusterDomain(f.clusterDomain),
			discovery.WithTrustDomain(f.trustDomain),
			discovery.WithControlPlaneNamespace(f.cpNamespace),
			discovery.WithDefaultOpaquePorts(opaque),
			discovery.WithLogger(logger),
			discovery.WithMetrics(metrics))
		if err != nil {
			return fail(ExitUsage, err)
		}
		defer idx.Close()
		if err := serveDestination(ctx, f, idx, reg, metrics, logger); err != nil {
			logger.Error("destination service failed", "error", err)
			return fail(ExitFailure, err)
		}
		return ExitOK
	}
}

func destinationLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serveDestination(ctx context.Context, f destinationFlags, idx *discovery.Index, reg *prometheus.Registry, metrics discovery.Metrics, logger *slog.Logger) error {
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch f.source {
	case "static":
		src, err := discoverystatic.New(startCtx, idx, f.manifests, discoverystatic.WithLogger(logger))
		if err != nil {
			return err
		}
		defer src.Close()
	case "kubernetes":
		cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return fmt.Errorf("kubernetes configuration: %w", err)
		}
		client, err := k8s.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kubernetes dynamic client: %w", err)
		}
		src, err := discoveryk8s.New(startCtx, idx, client, dyn, discoveryk8s.WithLogger(logger))
		if err != nil {
			return err
		}
		defer src.Close()
	}

	srv, err := discovery.NewServer(idx, discovery.WithLogger(logger), discovery.WithMetrics(metrics))
	if err != nil {
		return err
	}
	limits, err := f.server.limits()
	if err != nil {
		return err
	}
	gs, err := grpclimit.NewServer(limits)
	if err != nil {
		return err
	}
	srv.Register(gs)
	stats := idx.Stats()
	return serveGRPC(ctx, grpcServing{
		Name:        "destination service",
		Addr:        f.addr,
		Server:      gs,
		Services:    []string{"io.linkerd.proxy.destination.Destination"},
		MetricsAddr: f.metricsAddr,
		Registry:    reg,
		Logger:      logger,
		LogAttrs: []any{"mode", "plaintext", "source", f.source, "cluster_domain", f.clusterDomain,
			"services", stats.Objects["Service"], "endpoint_slices", stats.Objects["EndpointSlice"]},
		// Closing the index ends every stream with Unavailable, so proxies
		// reconnect (to another replica) instead of holding the drain open.
		BeforeStop: func() { _ = idx.Close() },
	})
}
