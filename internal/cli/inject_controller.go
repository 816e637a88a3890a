package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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

func setupInjectorController(fs *FlagSet) Action {
	addr := fs.String("addr", ":8443", "HOST:PORT to serve HTTPS on")
	tlsCert := fs.String("tls-cert", "", "serving certificate (PEM; required)")
	tlsKey := fs.String("tls-key", "", "serving key (PEM; required)")
	valuesFile := fs.String("values", "", "Values file (the weft-config ConfigMap's values.yaml); defaults when empty")
	trustAnchors := fs.String("trust-anchors", "", "PEM file of trust anchors handed to injected proxies (overrides the Values field)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	return func(ctx context.Context, args []string, stdio IO) int {
		logger, err := newLogger(stdio.Stderr, *logLevel)
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
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

		injector, err := webhook.NewInjector(values, namespaces, webhook.WithLogger(logger))
		if err != nil {
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitUsage
		}
		validator, err := webhook.NewValidator(webhook.WithLogger(logger))
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
		srv := &http.Server{
			Handler:           mux,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			MaxHeaderBytes:    64 << 10,
		}
		logger.Info("injector serving", "addr", lis.Addr().String())
		errc := make(chan error, 1)
		go func() { errc <- srv.ServeTLS(lis, "", "") }()
		select {
		case err := <-errc:
			fmt.Fprintf(stdio.Stderr, "weft-controller injector: %v\n", err)
			return ExitFailure
		case <-ctx.Done():
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("injector shutdown", "err", err)
		}
		return ExitOK
	}
}
