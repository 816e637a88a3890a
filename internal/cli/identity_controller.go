package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/certpem"
	identityk8s "github.com/weftmesh/weft/mesh/identity/kubernetes"
	"github.com/weftmesh/weft/mesh/identity/localca"
	"github.com/weftmesh/weft/mesh/identity/smallstep"
	"github.com/weftmesh/weft/mesh/identity/static"
)

// IdentityControllerCommand is `weft-controller identity`: the identity
// service (io.linkerd.proxy.identity.Identity) with gRPC health and server
// reflection. It serves plaintext unless --tls-cert and --tls-key are
// given (in a cluster the pod's own proxy terminates TLS).
func IdentityControllerCommand() Command {
	return Command{
		Name:    "identity",
		Summary: "run the identity service (workload certificate authority)",
		Setup:   setupIdentityController,
	}
}

// identityFlags are the flags of `weft-controller identity`.
type identityFlags struct {
	addr, metricsAddr          string
	trustAnchors               string
	issuer, issuerDir          string
	issuerSecret               string
	tokenBackend, staticTokens string
	tokenAudience, kubeconfig  string
	lifetime, skew             time.Duration
	trustDomain, cpNamespace   string
	tlsCert, tlsKey            string
	logLevel                   string
	stepURL, stepRoot          string
	stepProvisioner, stepKey   string
	stepPasswordFile           string
	stepX5CCert, stepX5CKey    string
	server                     serverLimitFlags
	rateBurst                  int
	ratePerSecond              float64
}

func setupIdentityController(fs *FlagSet) Action {
	var f identityFlags
	fs.StringVar(&f.addr, "addr", ":8080", "HOST:PORT to serve gRPC on")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "HOST:PORT to serve /metrics, /live and /ready on (off when empty)")
	fs.StringVar(&f.trustAnchors, "trust-anchors", "", "PEM bundle of trust anchors (required; followed for changes)")
	fs.StringVar(&f.issuer, "issuer", "local", "issuer backend: local or smallstep")
	fs.StringVar(&f.issuerDir, "issuer-dir", "", "local issuer: directory with crt.pem/key.pem or tls.crt/tls.key (followed for changes)")
	fs.StringVar(&f.issuerSecret, "issuer-secret", "", "local issuer: NAMESPACE/NAME of a Kubernetes Secret instead of --issuer-dir")
	fs.StringVar(&f.tokenBackend, "token-backend", "kubernetes", "token authenticator: kubernetes (TokenReview) or static")
	fs.StringVar(&f.staticTokens, "static-tokens", "", "static backend: YAML token file (tokens: [{token, namespace, serviceAccount}])")
	fs.StringVar(&f.tokenAudience, "token-audience", identityk8s.DefaultAudience, "kubernetes backend: audience tokens must be bound to")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	fs.DurationVar(&f.lifetime, "issuance-lifetime", identity.DefaultLifetime, "lifetime of issued certificates")
	fs.DurationVar(&f.skew, "clock-skew-allowance", identity.DefaultClockSkewAllowance, "how far back issued certificates are dated")
	fs.StringVar(&f.trustDomain, "trust-domain", identity.DefaultTrustDomain, "trust domain of identity names")
	fs.StringVar(&f.cpNamespace, "control-plane-namespace", identity.DefaultControlPlaneNamespace, "control-plane namespace in identity names")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (PEM) instead of plaintext")
	fs.StringVar(&f.tlsKey, "tls-key", "", "private key for --tls-cert")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.stepURL, "step-ca-url", "", "smallstep issuer: step-ca URL (https://HOST:PORT)")
	fs.StringVar(&f.stepRoot, "step-ca-root", "", "smallstep issuer: step-ca root certificate (PEM)")
	fs.StringVar(&f.stepProvisioner, "step-provisioner", "", "smallstep issuer: JWK provisioner name")
	fs.StringVar(&f.stepKey, "step-provisioner-key", "", "smallstep issuer: provisioner private JWK file")
	fs.StringVar(&f.stepPasswordFile, "step-provisioner-password-file", "", "smallstep issuer: file holding the JWK's password (when encrypted)")
	fs.StringVar(&f.stepX5CCert, "step-x5c-cert", "", "smallstep issuer: certificate chain (PEM) for an X5C provisioner, instead of --step-provisioner-key")
	fs.StringVar(&f.stepX5CKey, "step-x5c-key", "", "smallstep issuer: private key (PEM) of --step-x5c-cert")
	fs.IntVar(&f.rateBurst, "certify-burst", identity.DefaultRateLimit.Burst, "certificates one identity may get at once (with --certify-rate 0: no limit)")
	fs.Float64Var(&f.ratePerSecond, "certify-rate", identity.DefaultRateLimit.PerSecond, "certificates per second one identity may get after the burst; 0 turns the limit off")
	f.server.register(fs)
	return func(ctx context.Context, args []string, stdio IO) int {
		if err := f.validate(len(args)); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller identity: %v\n", err)
			return ExitUsage
		}
		logger, err := newLogger(stdio.Stderr, f.logLevel)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller identity: %v\n", err)
			return ExitUsage
		}
		if err := serveIdentity(ctx, f, logger); err != nil {
			logger.Error("identity service failed", "error", err)
			fmt.Fprintf(stdio.Stderr, "weft-controller identity: %v\n", err)
			return ExitFailure
		}
		return ExitOK
	}
}

func (f identityFlags) validate(nargs int) error {
	if _, err := f.server.limits(); err != nil {
		return err
	}
	if err := f.rateLimit().Validate(); err != nil {
		return fmt.Errorf("--certify-burst %d / --certify-rate %g: %w", f.rateBurst, f.ratePerSecond, err)
	}
	switch {
	case nargs != 0:
		return errors.New("no positional arguments are taken")
	case f.trustAnchors == "":
		return errors.New("--trust-anchors is required")
	case f.tokenBackend != "kubernetes" && f.tokenBackend != "static":
		return fmt.Errorf("--token-backend %q: want kubernetes or static", f.tokenBackend)
	case f.tokenBackend == "static" && f.staticTokens == "":
		return errors.New("--token-backend static needs --static-tokens FILE")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return errors.New("--tls-cert and --tls-key go together")
	}
	switch f.issuer {
	case "local":
		if (f.issuerDir == "") == (f.issuerSecret == "") {
			return errors.New("the local issuer needs exactly one of --issuer-dir DIR or --issuer-secret NAMESPACE/NAME")
		}
		if f.issuerSecret != "" && strings.Count(f.issuerSecret, "/") != 1 {
			return fmt.Errorf("--issuer-secret %q: want NAMESPACE/NAME", f.issuerSecret)
		}
	case "smallstep":
		if f.stepURL == "" || f.stepRoot == "" || f.stepProvisioner == "" {
			return errors.New("the smallstep issuer needs --step-ca-url, --step-ca-root and --step-provisioner")
		}
		x5c := f.stepX5CCert != "" || f.stepX5CKey != ""
		if x5c == (f.stepKey != "") || (x5c && (f.stepX5CCert == "" || f.stepX5CKey == "")) {
			return errors.New("the smallstep issuer needs either --step-provisioner-key (JWK) or both --step-x5c-cert and --step-x5c-key (X5C)")
		}
	default:
		return fmt.Errorf("--issuer %q: want local or smallstep", f.issuer)
	}
	return nil
}

// rateLimit is the per-identity limit the flags ask for; --certify-rate 0
// turns it off.
func (f identityFlags) rateLimit() identity.RateLimit {
	if f.ratePerSecond == 0 {
		return identity.RateLimit{}
	}
	return identity.RateLimit{Burst: f.rateBurst, PerSecond: f.ratePerSecond}
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func serveIdentity(ctx context.Context, f identityFlags, logger *slog.Logger) error {
	reg := newRegistry()
	metrics, err := identity.NewPrometheusMetrics(reg)
	if err != nil {
		return err
	}

	bundle, err := identity.NewBundleFile(ctx, f.trustAnchors, identity.WithLogger(logger))
	if err != nil {
		return err
	}
	defer bundle.Close()

	var kube k8s.Interface
	kubeClient := func() (k8s.Interface, error) {
		if kube != nil {
			return kube, nil
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes configuration: %w", err)
		}
		kube, err = k8s.NewForConfig(cfg)
		return kube, err
	}

	var issuer identity.Issuer
	switch f.issuer {
	case "local":
		var is interface {
			identity.Issuer
			Close() error
		}
		opts := []localca.Option{localca.WithLogger(logger), localca.WithMetrics(metrics)}
		if f.issuerDir != "" {
			is, err = localca.New(ctx, f.issuerDir, bundle, opts...)
		} else {
			ns, name, _ := strings.Cut(f.issuerSecret, "/")
			var client k8s.Interface
			if client, err = kubeClient(); err == nil {
				is, err = identityk8s.NewSecretIssuer(ctx, client, ns, name, bundle, opts...)
			}
		}
		if err != nil {
			return err
		}
		defer is.Close()
		issuer = is
	case "smallstep":
		if issuer, err = newStepIssuer(ctx, f, logger); err != nil {
			return err
		}
	}

	var authn identity.Authenticator
	switch f.tokenBackend {
	case "static":
		tokens, err := static.New(ctx, f.staticTokens, static.WithLogger(logger))
		if err != nil {
			return err
		}
		defer tokens.Close()
		authn = tokens
	case "kubernetes":
		client, err := kubeClient()
		if err != nil {
			return err
		}
		if authn, err = identityk8s.New(ctx, client, identityk8s.WithAudience(f.tokenAudience), identityk8s.WithLogger(logger)); err != nil {
			return err
		}
	}

	limits, err := f.server.limits()
	if err != nil {
		return err
	}
	svc, err := identity.NewService(ctx, authn, issuer,
		identity.WithRequestTimeout(limits.RequestTimeout),
		identity.WithRateLimit(f.rateLimit()),
		identity.WithDomain(identity.Domain{ControlPlaneNamespace: f.cpNamespace, TrustDomain: f.trustDomain}),
		identity.WithLifetime(f.lifetime),
		identity.WithClockSkewAllowance(f.skew),
		identity.WithLogger(logger),
		identity.WithMetrics(metrics))
	if err != nil {
		return err
	}

	var opts []grpc.ServerOption
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert %s / --tls-key %s: %w", f.tlsCert, f.tlsKey, err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	srv, err := grpclimit.NewServer(limits, opts...)
	if err != nil {
		return err
	}
	svc.Register(srv)
	mode := "plaintext"
	if f.tlsCert != "" {
		mode = "tls"
	}
	return serveGRPC(ctx, grpcServing{
		Name:        "identity service",
		Addr:        f.addr,
		Server:      srv,
		Services:    []string{"io.linkerd.proxy.identity.Identity"},
		MetricsAddr: f.metricsAddr,
		Registry:    reg,
		Logger:      logger,
		LogAttrs:    []any{"mode", mode, "trust_domain", f.trustDomain, "issuer", f.issuer, "token_backend", f.tokenBackend},
	})
}

func newStepIssuer(ctx context.Context, f identityFlags, logger *slog.Logger) (identity.Issuer, error) {
	rootPEM, err := os.ReadFile(f.stepRoot)
	if err != nil {
		return nil, fmt.Errorf("--step-ca-root: %w", err)
	}
	roots, err := identity.ParseBundle(rootPEM)
	if err != nil {
		return nil, fmt.Errorf("--step-ca-root %s: %w", f.stepRoot, err)
	}
	cfg := smallstep.Config{URL: f.stepURL, Roots: roots.Pool(), Provisioner: f.stepProvisioner}
	if f.stepX5CCert != "" {
		certPEM, err := os.ReadFile(f.stepX5CCert)
		if err != nil {
			return nil, fmt.Errorf("--step-x5c-cert: %w", err)
		}
		keyPEM, err := os.ReadFile(f.stepX5CKey)
		if err != nil {
			return nil, fmt.Errorf("--step-x5c-key: %w", err)
		}
		leaf, chain, key, err := certpem.ParseKeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--step-x5c-cert %s / --step-x5c-key %s: %w", f.stepX5CCert, f.stepX5CKey, err)
		}
		cfg.X5C = &smallstep.X5CCredentials{Chain: append([]*x509.Certificate{leaf}, chain...), Key: key}
		return smallstep.New(ctx, cfg, smallstep.WithLogger(logger))
	}
	var password []byte
	if f.stepPasswordFile != "" {
		p, err := os.ReadFile(f.stepPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--step-provisioner-password-file: %w", err)
		}
		password = []byte(strings.TrimRight(string(p), "\r\n"))
	}
	key, err := smallstep.LoadJWK(f.stepKey, password)
	if err != nil {
		return nil, err
	}
	cfg.Key = key
	return smallstep.New(ctx, cfg, smallstep.WithLogger(logger))
}
