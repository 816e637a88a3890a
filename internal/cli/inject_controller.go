package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/weftmesh/weft/mesh/grpclimit"
	"github.com/weftmesh/weft/mesh/inject"
	injectk8s "github.com/weftmesh/weft/mesh/inject/kubernetes"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// InjectorControllerCommand is `weft-controller injector`: the mutating
// injection webhook (/inject) and the validating webhook (/validate) served
// over HTTPS, as the API server requires.
func InjectorControllerCommand() Command {
	return Command{Name: "injector", Summary: "run the admission webhooks (proxy injection, resource validation)", Setup: setupInjectorController}
}

// Connection caps of the webhook server: the API server (a few replicas,
// each holding one HTTP/2 connection, or a few HTTP/1.1 ones) is its only
// expected client, so a handful of peers fit with room to spare.
const (
	defaultWebhookMaxConnections        = 500
	defaultWebhookMaxConnectionsPerPeer = 50
)

// defaultWebhookShutdownDelay is how long the injector keeps serving
// after it is told to stop (SIGTERM), with /ready failing, before it
// closes its listener. The API server reaches the webhook through the
// Service, and the Service drops a terminating pod only after the
// endpoints controller and kube-proxy (or the API server's own endpoint
// cache) have seen it go: a listener closed at once answers the requests
// still routed to it with a refused connection, and a refused call under
// failurePolicy Ignore admits the pod without a proxy. A few seconds cover
// that propagation; the pod's termination grace period (30 s by default)
// covers the delay and the shutdown after it.
const defaultWebhookShutdownDelay = 5 * time.Second

// serveWebhooks serves h over TLS on lis, under the connection caps of
// conns, until ctx ends. Then it keeps serving, with /ready answering 503,
// until lameDuck's channel fires (the shutdown delay), and shuts down
// within 10 s. Slow clients are bounded by the timeouts: a request head
// within 5 s, a whole request within 30 s, a response within 30 s, an
// idle keep-alive connection 30 s.
func serveWebhooks(ctx context.Context, lis net.Listener, conns *grpclimit.Connections, h http.Handler, cert tls.Certificate, logger *slog.Logger, lameDuck func() <-chan time.Time) error {
	lis = conns.Listener(lis)
	var stopping atomic.Bool
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/ready" && stopping.Load() {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(lis, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stopping.Store(true)
	logger.Info("injector stopping: serving on while the Service forgets this pod")
	select {
	case err := <-errc:
		return err
	case <-lameDuck():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("injector shutdown", "err", err)
	}
	return nil
}

func setupInjectorController(fs *FlagSet) Action {
	addr := fs.String("addr", ":8443", "HOST:PORT to serve HTTPS on")
	tlsCert := fs.String("tls-cert", "", "serving certificate (PEM; required)")
	tlsKey := fs.String("tls-key", "", "serving key (PEM; required)")
	valuesFile := fs.String("values", "", "Values file (the weft-config ConfigMap's values.yaml); defaults when empty")
	trustAnchors := fs.String("trust-anchors", "", "PEM file of trust anchors handed to injected proxies (overrides the Values field)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	injectMax := fs.Int64("inject-max-body-bytes", webhook.MaxBodyBytes, "largest AdmissionReview /inject reads; larger get 413")
	validateMax := fs.Int64("validate-max-body-bytes", webhook.MaxValidateBodyBytes, "largest AdmissionReview /validate reads; larger get 413")
	maxInFlight := fs.Int("max-in-flight", webhook.DefaultMaxInFlight, "AdmissionReviews handled at once (both webhooks); more get 429 with Retry-After")
	maxConns := fs.Int("max-connections", defaultWebhookMaxConnections, "connections held open at once by all clients; more are closed as soon as accepted")
	maxConnsPerPeer := fs.Int("max-connections-per-peer", defaultWebhookMaxConnectionsPerPeer, "connections held open at once by one client IP address")
	shutdownDelay := fs.Duration("shutdown-delay", defaultWebhookShutdownDelay, "on SIGTERM, keep serving this long with /ready failing before closing the listener, so the Service stops routing here first")
	return func(ctx context.Context, args []string, stdio IO) int {
		if *injectMax < 1 || *validateMax < 1 {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: --inject-max-body-bytes %d / --validate-max-body-bytes %d: want positive sizes\n", *injectMax, *validateMax)
			return ExitUsage
		}
		if *maxConns < 1 || *maxConnsPerPeer < 1 || *maxConnsPerPeer > *maxConns {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: --max-connections %d / --max-connections-per-peer %d: want positive numbers, the second at most the first\n", *maxConns, *maxConnsPerPeer)
			return ExitUsage
		}
		limiter, err := webhook.NewLimiter(*maxInFlight)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: --max-in-flight %d: %v\n", *maxInFlight, err)
			return ExitUsage
		}
		logger, err := newLogger(stdio.Stderr, *logLevel)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitUsage
		}
		if *shutdownDelay < 0 {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: --shutdown-delay %s: want zero or a positive duration\n", *shutdownDelay)
			return ExitUsage
		}
		if *tlsCert == "" || *tlsKey == "" {
			fmt.Fprintln(stdio.Stderr, "weft-controller injector: --tls-cert and --tls-key are required (the API server calls webhooks over HTTPS)")
			return ExitUsage
		}
		values := inject.DefaultValues()
		if *valuesFile != "" {
			data, err := os.ReadFile(*valuesFile)
			if err == nil {
				values, err = inject.ParseValues(data)
			}
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-controller injector: --values %s: %v\n", *valuesFile, err)
				return ExitUsage
			}
		}
		if *trustAnchors != "" {
			pem, err := os.ReadFile(*trustAnchors)
			if err != nil {
				fmt.Fprintf(stdio.Stderr, "weft-controller injector: --trust-anchors: %v\n", err)
				return ExitUsage
			}
			values.IdentityTrustAnchorsPEM = string(pem)
		}
		cert, err := tls.LoadX509KeyPair(*tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: serving certificate: %v\n", err)
			return ExitUsage
		}

		restCfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: kubeconfig: %v\n", err)
			return ExitUsage
		}
		client, err := k8s.NewForConfig(restCfg)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: kubernetes client: %v\n", err)
			return ExitUsage
		}
		namespaces, err := injectk8s.NewNamespaces(ctx, client)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitFailure
		}
		defer namespaces.Close()

		injector, err := webhook.NewInjector(values, namespaces, webhook.WithLogger(logger),
			webhook.WithMaxBodyBytes(*injectMax), webhook.WithLimiter(limiter))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitUsage
		}
		validator, err := webhook.NewValidator(webhook.WithLogger(logger),
			webhook.WithMaxBodyBytes(*validateMax), webhook.WithLimiter(limiter))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitUsage
		}
		mux := http.NewServeMux()
		mux.Handle("/inject", injector)
		mux.Handle("/validate", validator)
		mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

		lis, err := net.Listen("tcp", *addr)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitFailure
		}
		logger.Info("injector serving", "addr", lis.Addr().String())
		if err := serveWebhooks(ctx, lis, grpclimit.NewConnections(*maxConns, *maxConnsPerPeer), mux, cert, logger,
			func() <-chan time.Time { return time.After(*shutdownDelay) }); err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitFailure
		}
		return ExitOK
	}
}
