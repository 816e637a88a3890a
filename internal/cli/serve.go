package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// gracefulStopTimeout bounds how long a controller waits for open streams
// after SIGTERM before closing them.
const gracefulStopTimeout = 10 * time.Second

// grpcServing is what a control-plane component serves: one gRPC server
// with health and reflection, an optional metrics listener, and background
// runners that share its lifetime.
type grpcServing struct {
	// Name starts the log lines: "<Name> listening", "<Name> stopping".
	Name   string
	Addr   string
	Server *grpc.Server
	// Services are marked SERVING in gRPC health (the overall "" status too).
	Services []string
	// MetricsAddr, when set, serves /metrics from Registry plus /live and /ready.
	MetricsAddr string
	Registry    *prometheus.Registry
	Logger      *slog.Logger
	// LogAttrs are added to the "listening" line.
	LogAttrs []any
	// BeforeStop runs after health turns NOT_SERVING and before the graceful
	// stop, for example to end long-lived streams so they reconnect elsewhere.
	BeforeStop func()
	// Runners run until ctx ends; an error from one stops everything.
	Runners []func(context.Context) error
}

// serveGRPC opens the listeners, serves until ctx is cancelled or something
// fails, then stops gracefully within gracefulStopTimeout. It returns nil
// on a clean cancellation.
func serveGRPC(ctx context.Context, s grpcServing) error {
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, svc := range s.Services {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(s.Server, hs)
	reflection.Register(s.Server)

	lis, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("--addr %s: %w", s.Addr, err)
	}
	var metricsSrv *http.Server
	var mlis net.Listener
	if s.MetricsAddr != "" {
		if mlis, err = net.Listen("tcp", s.MetricsAddr); err != nil {
			lis.Close()
			return fmt.Errorf("--metrics-addr %s: %w", s.MetricsAddr, err)
		}
		reg := s.Registry
		if reg == nil {
			reg = prometheus.NewRegistry()
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
		mux.HandleFunc("/live", ok)
		mux.HandleFunc("/ready", ok)
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}

	g, gctx := errgroup.WithContext(ctx)
	for _, run := range s.Runners {
		g.Go(func() error { return run(gctx) })
	}
	g.Go(func() error {
		if err := s.Server.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	if metricsSrv != nil {
		g.Go(func() error {
			if err := metricsSrv.Serve(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
		s.Logger.Info("metrics listening", "addr", mlis.Addr().String())
	}
	g.Go(func() error {
		<-gctx.Done()
		s.Logger.Info(s.Name + " stopping")
		hs.Shutdown()
		if s.BeforeStop != nil {
			s.BeforeStop()
		}
		stopped := make(chan struct{})
		go func() { s.Server.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(gracefulStopTimeout):
			s.Server.Stop()
		}
		if metricsSrv != nil {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = metricsSrv.Shutdown(sctx)
		}
		return nil
	})
	s.Logger.Info(s.Name+" listening", append([]any{"addr", lis.Addr().String()}, s.LogAttrs...)...)
	return g.Wait()
}
