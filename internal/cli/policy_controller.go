package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/policy"
	policyk8s "github.com/weftmesh/weft/mesh/policy/kubernetes"
	"github.com/weftmesh/weft/mesh/policy/static"
)

// PolicyControllerCommand is `weft-controller policy`: the Inbound and
// Outbound policy APIs for proxies (io.linkerd.proxy.inbound and
// io.linkerd.proxy.outbound), fed by a Kubernetes cluster or by manifest
// files, with gRPC health and server reflection.
func PolicyControllerCommand() Command {
	return Command{
		Name:    "policy",
		Summary: "run the policy controller (inbound and outbound policy APIs)",
		Setup:   setupPolicyController,
	}
}

type policyControllerFlags struct {
	addr, source, kubeconfig string
	metricsAddr              string
	manifests                StringList
	defaultPolicy            string
	clusterNetworks          StringList
	probeNetworks            StringList
	probeSet                 bool
	trustDomain, cpNamespace string
	clusterDomain            string
	detectTimeout            time.Duration
	egressNamespace          string
	opaquePorts              string
	logLevel                 string
	gatewayAPI               string
	poll                     time.Duration
	server                   serverLimitFlags
	writeStatus              bool
	statusLeaseNamespace     string
	statusIdentity           string
}

func setupPolicyController(fs *FlagSet) Action {
	var f policyControllerFlags
	fs.StringVar(&f.addr, "addr", ":8090", "HOST:PORT to serve gRPC on")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "HOST:PORT to serve /metrics, /live and /ready on (off when empty)")
	fs.StringVar(&f.source, "source", "kubernetes", "where objects come from: kubernetes or static")
	fs.Var(&f.manifests, "manifests", "static source: file or directory of manifests (repeatable; followed for changes)")
	fs.DurationVar(&f.poll, "poll-interval", 2*time.Second, "static source: how often files are checked besides notifications")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubernetes source: kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&f.gatewayAPI, "gateway-api", "auto", "kubernetes source: Gateway API HTTPRoutes, GRPCRoutes, TCPRoutes and TLSRoutes: auto (watched while their CRDs are installed, picked up when they appear), true (the HTTPRoute and GRPCRoute CRDs required at start, then as auto) or false (never)")
	fs.BoolVar(&f.writeStatus, "write-status", true, "kubernetes source: write status.parents (Accepted, ResolvedRefs) on the HTTPRoutes and GRPCRoutes whose parents are Servers or Services, one replica at a time")
	fs.StringVar(&f.statusLeaseNamespace, "status-lease-namespace", "", "kubernetes source: namespace of the Lease that picks the replica writing route status (default: --control-plane-namespace)")
	fs.StringVar(&f.statusIdentity, "status-identity", "", "kubernetes source: this replica's name in that Lease (default: the host name, which is the pod name)")
	fs.StringVar(&f.defaultPolicy, "default-policy", "all-unauthenticated", "cluster default inbound policy")
	core.RegisterClusterNetworks(fs, &f.clusterNetworks)
	core.RegisterProbeNetworks(fs, &f.probeNetworks, &f.probeSet)
	fs.StringVar(&f.trustDomain, "trust-domain", "cluster.local", "trust domain of identity names")
	fs.StringVar(&f.cpNamespace, "control-plane-namespace", "weft", "control-plane namespace in identity names")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local", "DNS suffix of Services")
	fs.DurationVar(&f.detectTimeout, "detect-timeout", 10*time.Second, "protocol detection timeout sent to proxies")
	fs.StringVar(&f.egressNamespace, "global-egress-network-namespace", policy.DefaultGlobalEgressNamespace, "namespace whose EgressNetworks apply to clients of every namespace (after those of the client's own namespace)")
	core.RegisterDefaultOpaquePorts(fs, &f.opaquePorts)
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	f.server.register(fs)
	return func(ctx context.Context, args []string, stdio IO) int {
		fail := func(err error) int {
			fmt.Fprintf(stdio.Stderr, "weft-controller policy: %v\n", err)
			return ExitUsage
		}
		if len(args) != 0 {
			return fail(errors.New("no positional arguments are taken"))
		}
		limits, err := f.server.limits()
		if err != nil {
			return fail(err)
		}
		switch f.source {
		case "static":
			if len(f.manifests) == 0 {
				return fail(errors.New("--source static needs --manifests PATH"))
			}
		case "kubernetes":
			if len(f.manifests) > 0 {
				return fail(errors.New("--manifests goes with --source static"))
			}
		default:
			return fail(fmt.Errorf("--source %q: want kubernetes or static", f.source))
		}
		if _, err := policyk8s.ParseGatewayAPIMode(f.gatewayAPI); err != nil {
			return fail(fmt.Errorf("--gateway-api %q: want auto, true or false", f.gatewayAPI))
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
			return fail(fmt.Errorf("--log-level %q: %v", f.logLevel, err))
		}
		opaque, err := core.ParseDefaultOpaquePorts(f.opaquePorts)
		if err != nil {
			return fail(err)
		}
		logger := slog.New(slog.NewTextHandler(stdio.Stderr, &slog.HandlerOptions{Level: level}))
		opts := []policy.Option{
			policy.WithDefaultOpaquePorts(opaque),
			policy.WithDefaultPolicy(f.defaultPolicy), policy.WithTrustDomain(f.trustDomain),
			policy.WithControlPlaneNamespace(f.cpNamespace), policy.WithClusterDomain(f.clusterDomain),
			policy.WithDetectTimeout(f.detectTimeout), policy.WithLogger(logger),
			policy.WithGlobalEgressNamespace(f.egressNamespace),
		}
		if len(f.clusterNetworks) > 0 {
			opts = append(opts, policy.WithClusterNetworks(f.clusterNetworks...))
		}
		if f.probeSet {
			opts = append(opts, policy.WithProbeNetworks(f.probeNetworks...))
		}
		if _, err := policy.NewConfig(opts...); err != nil {
			return fail(err)
		}
		if err := servePolicy(ctx, f, limits, opts, logger); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller policy: %v\n", err)
			return ExitFailure
		}
		return ExitOK
	}
}

// policyBackend is where the controller's objects come from, and for a
// cluster the clients that write route status.
type policyBackend struct {
	src   policy.Source
	close func() error
	kube  k8s.Interface
	dyn   dynamic.Interface
}

func policySource(ctx context.Context, f policyControllerFlags, metrics policy.Metrics, logger *slog.Logger) (policyBackend, error) {
	if f.source == "static" {
		src, err := static.New(ctx, f.manifests, static.WithLogger(logger), static.WithPollInterval(f.poll))
		if err != nil {
			return policyBackend{}, err
		}
		return policyBackend{src: src, close: src.Close}, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return policyBackend{}, fmt.Errorf("kubernetes configuration: %w", err)
	}
	client, err := k8s.NewForConfig(cfg)
	if err != nil {
		return policyBackend{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return policyBackend{}, err
	}
	mode, err := policyk8s.ParseGatewayAPIMode(f.gatewayAPI)
	if err != nil {
		return policyBackend{}, err
	}
	src, err := policyk8s.New(ctx, client, dyn, policyk8s.WithLogger(logger), policyk8s.WithGatewayAPI(mode), policyk8s.WithMetrics(metrics))
	if err != nil {
		return policyBackend{}, err
	}
	return policyBackend{src: src, close: src.Close, kube: client, dyn: dyn}, nil
}

// statusWriter returns the runner that writes route status, or nil when
// there is none to write (a static source, or --write-status=false).
func statusWriter(f policyControllerFlags, b policyBackend, x *policy.Indexer, logger *slog.Logger) (func(context.Context) error, error) {
	if b.dyn == nil || !f.writeStatus {
		return nil, nil
	}
	ns := f.statusLeaseNamespace
	if ns == "" {
		ns = f.cpNamespace
	}
	id := f.statusIdentity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--status-identity: no host name to default to: %w", err)
		}
		id = host
	}
	w, err := policyk8s.NewStatusWriter(b.dyn, x, policyk8s.WithStatusLogger(logger), policyk8s.WithStatusLease(b.kube, ns, id))
	if err != nil {
		return nil, err
	}
	return w.Run, nil
}

func servePolicy(ctx context.Context, f policyControllerFlags, limits grpclimit.Limits, opts []policy.Option, logger *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reg := newRegistry()
	metrics, err := policy.NewPrometheusMetrics(reg)
	if err != nil {
		return err
	}
	backend, err := policySource(ctx, f, metrics, logger)
	if err != nil {
		return err
	}
	defer backend.close()
	x, err := policy.NewIndexer(ctx, backend.src, append(opts, policy.WithMetrics(metrics))...)
	if err != nil {
		return err
	}
	runners := []func(context.Context) error{x.Run}
	writeStatus, err := statusWriter(f, backend, x, logger)
	if err != nil {
		return err
	}
	if writeStatus != nil {
		runners = append(runners, writeStatus)
	}
	in, err := policy.NewInboundServer(x)
	if err != nil {
		return err
	}
	out, err := policy.NewOutboundServer(x)
	if err != nil {
		return err
	}
	gs, err := grpclimit.NewServer(limits)
	if err != nil {
		return err
	}
	in.Register(gs)
	out.Register(gs)
	return serveGRPC(ctx, grpcServing{
		Name:        "policy controller",
		Addr:        f.addr,
		Server:      gs,
		Services:    []string{inbound.InboundServerPolicies_ServiceDesc.ServiceName, outbound.OutboundPolicies_ServiceDesc.ServiceName},
		Logger:      logger,
		LogAttrs:    []any{"source", f.source},
		MetricsAddr: f.metricsAddr,
		Registry:    reg,
		BeforeStop: func() {
			in.Drain()
			out.Drain()
		},
		Runners: runners,
	})
}
