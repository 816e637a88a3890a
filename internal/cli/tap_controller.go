package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/identity"
	idclient "github.com/weftmesh/weft/mesh/identity/client"
	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

// TapControllerCommand is `weft-controller tap`: the cluster's tap API
// (tap.weftmesh.io, behind the API server's aggregation layer), which
// taps proxies with the tapper identity it gets from the identity
// service. See package mesh/viz/tapapi and docs/viz.md.
func TapControllerCommand() Command {
	return Command{Name: "tap", Summary: "run the tap API (tap.weftmesh.io) that weft viz tap and top use in a cluster", Setup: setupTapController}
}

// tapControllerFlags are the flags of `weft-controller tap`.
type tapControllerFlags struct {
	addr, tlsCert, tlsKey     string
	identityAddr, anchors     string
	tokenFile, identityName   string
	trustDomain, kubeconfig   string
	logLevel                  string
	tapsPerUser, podsPerTap   int
	eventsPerSecond           int
	writeTimeout              time.Duration
	maxConns, maxConnsPerPeer int
}

func setupTapController(fs *FlagSet) Action {
	var f tapControllerFlags
	l := tapapi.DefaultLimits()
	fs.StringVar(&f.addr, "addr", ":8089", "HOST:PORT to serve the tap API on (HTTPS; the API server is its client)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serving certificate the API server verifies against the APIService's caBundle (PEM; required)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "serving key (PEM; required)")
	fs.StringVar(&f.identityAddr, "identity-addr", "", "HOST:PORT of the identity service (required)")
	fs.StringVar(&f.anchors, "trust-anchors", "", "PEM bundle of the mesh's trust anchors (required; followed for changes)")
	fs.StringVar(&f.tokenFile, "token-file", vocab.IdentityTokenFile, "projected service-account token (audience "+vocab.IdentityTokenAudience+") sent to the identity service")
	fs.StringVar(&f.identityName, "identity", "", "the mesh identity to request, the tapper identity the proxies accept (required)")
	fs.StringVar(&f.trustDomain, "trust-domain", vocab.DefaultTrustDomain, "trust domain of the tapped pods' identities")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.IntVar(&f.tapsPerUser, "max-taps-per-user", l.TapsPerUser, "taps one user may hold open at once; more get 429")
	fs.IntVar(&f.podsPerTap, "max-pods-per-tap", l.PodsPerTap, "proxies one tap opens; the others are named in a warning")
	fs.IntVar(&f.eventsPerSecond, "max-events-per-second", l.EventsPerSecond, "events one tap sends per second; more are dropped and counted")
	fs.DurationVar(&f.writeTimeout, "write-timeout", l.WriteTimeout, "end a tap whose reader has not taken a write within this")
	fs.IntVar(&f.maxConns, "max-connections", defaultWebhookMaxConnections, "connections held open at once by all clients")
	fs.IntVar(&f.maxConnsPerPeer, "max-connections-per-peer", defaultWebhookMaxConnectionsPerPeer, "connections held open at once by one client IP address")
	return func(ctx context.Context, args []string, stdio IO) int {
		fail := func(code int, err error) int {
			fmt.Fprintf(stdio.Stderr, "weft-controller tap: %v\n", err)
			return code
		}
		if err := f.validate(len(args)); err != nil {
			return fail(ExitUsage, err)
		}
		logger, err := newLogger(stdio.Stderr, f.logLevel)
		if err != nil {
			return fail(ExitUsage, err)
		}
		if err := serveTap(ctx, f, logger); err != nil {
			logger.Error("tap API failed", "error", err)
			return fail(ExitFailure, err)
		}
		return ExitOK
	}
}

func (f tapControllerFlags) validate(nargs int) error {
	switch {
	case nargs != 0:
		return errors.New("no positional arguments are taken")
	case f.tlsCert == "" || f.tlsKey == "":
		return errors.New("--tls-cert and --tls-key are required (the API server calls aggregated APIs over HTTPS)")
	case f.identityAddr == "" || f.anchors == "" || f.identityName == "":
		return errors.New("--identity-addr, --trust-anchors and --identity are required (the proxies serve tap only to the tapper identity)")
	case f.maxConns < 1 || f.maxConnsPerPeer < 1 || f.maxConnsPerPeer > f.maxConns:
		return fmt.Errorf("--max-connections %d / --max-connections-per-peer %d: want positive numbers, the second at most the first", f.maxConns, f.maxConnsPerPeer)
	}
	if _, err := identity.ParseName(f.identityName); err != nil {
		return fmt.Errorf("--identity %q: %w", f.identityName, err)
	}
	if err := f.limits().Validate(); err != nil {
		return fmt.Errorf("--max-taps-per-user, --max-pods-per-tap, --max-events-per-second, --write-timeout: %w", err)
	}
	return nil
}

func (f tapControllerFlags) limits() tapapi.Limits {
	l := tapapi.DefaultLimits()
	l.TapsPerUser, l.PodsPerTap, l.EventsPerSecond, l.WriteTimeout = f.tapsPerUser, f.podsPerTap, f.eventsPerSecond, f.writeTimeout
	return l
}

func serveTap(ctx context.Context, f tapControllerFlags, logger *slog.Logger) error {
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubernetes configuration: %w", err)
	}
	restCfg.Timeout = 30 * time.Second
	kube, err := k8s.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	authn, err := vizk8s.LoadRequestHeader(ctx, kube)
	if err != nil {
		return err
	}
	id, err := tapperIdentity(ctx, f, logger)
	if err != nil {
		return err
	}
	defer id.Close()
	backend, err := tapapi.NewProxies(vizk8s.Lister(kube, vizk8s.WithTrustDomain(f.trustDomain)), func(peer string) (credentials.TransportCredentials, error) {
		n, err := identity.ParseName(peer)
		if err != nil {
			return nil, err
		}
		return id.ClientCredentials(n), nil
	})
	if err != nil {
		return err
	}
	srv, err := tapapi.New(backend, authn, vizk8s.SubjectAccessReviews{Client: kube}, tapapi.WithLimits(f.limits()), tapapi.WithLogger(logger))
	if err != nil {
		return err
	}
	lis, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	conns := grpclimit.NewConnections(f.maxConns, f.maxConnsPerPeer)
	logger.Info("tap API listening", "addr", lis.Addr().String(), "identity", f.identityName, "group", tapapi.Group)
	return serveTapAPI(ctx, conns.Listener(lis), srv, cert, logger)
}

// tapperIdentity obtains the tap component's certificate from the
// identity service, as a proxy does, and keeps it fresh.
func tapperIdentity(ctx context.Context, f tapControllerFlags, logger *slog.Logger) (*idclient.Client, error) {
	name, err := identity.ParseName(f.identityName)
	if err != nil {
		return nil, err
	}
	bundle, err := identity.NewBundleFile(ctx, f.anchors, identity.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	// The identity service is plaintext gRPC inside the cluster, as the
	// proxies reach it; the projected token proves the service account.
	conn, err := grpc.NewClient(f.identityAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		bundle.Close()
		return nil, fmt.Errorf("--identity-addr %s: %w", f.identityAddr, err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cl, err := idclient.New(startCtx, idclient.Config{Name: name, TokenFile: f.tokenFile, Bundle: bundle, Certifier: idclient.NewGRPCCertifier(conn)},
		idclient.WithLogger(logger))
	if err != nil {
		conn.Close()
		bundle.Close()
		return nil, fmt.Errorf("obtaining the tapper certificate for %s: %w", name, err)
	}
	context.AfterFunc(ctx, func() { conn.Close(); bundle.Close() })
	return cl, nil
}

// serveTapAPI serves h over TLS on lis until ctx ends. Client
// certificates are requested, not verified here: h checks them per
// request against the requestheader client CA. A tap streams for as long
// as its user watches, so there is no overall read or write timeout (a
// read deadline would end a streaming request too); the tap API bounds
// the body it reads and each write instead, and reads a body only from
// an authenticated API server.
func serveTapAPI(ctx context.Context, lis net.Listener, h http.Handler, cert tls.Certificate, logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert},
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(lis, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // open taps end with ctx (BaseContext)
	<-errc
	return nil
}
