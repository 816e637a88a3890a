package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/weftmesh/weft/mesh/grpclimit"
)

// serverLimitFlags are the flags every gRPC controller (identity,
// destination, policy) takes for its server limits: the same names, the
// same defaults, from one place.
type serverLimitFlags struct {
	l          grpclimit.Limits
	maxStreams uint
}

// register adds the flags to fs, with grpclimit's defaults.
func (f *serverLimitFlags) register(fs *FlagSet) {
	f.l = grpclimit.Defaults()
	f.maxStreams = uint(f.l.MaxStreamsPerConnection)
	fs.DurationVar(&f.l.ConnectionTimeout, "connection-timeout", f.l.ConnectionTimeout, "close a connection that has not finished its handshake (TLS, HTTP/2 preface) within this")
	fs.DurationVar(&f.l.KeepaliveMinTime, "keepalive-min-time", f.l.KeepaliveMinTime, "disconnect clients that ping more often than this")
	fs.DurationVar(&f.l.KeepaliveTime, "keepalive-time", f.l.KeepaliveTime, "ping a connection that has been silent for this long")
	fs.DurationVar(&f.l.KeepaliveTimeout, "keepalive-timeout", f.l.KeepaliveTimeout, "close a connection whose ping is not answered within this")
	fs.DurationVar(&f.l.MaxConnectionIdle, "max-connection-idle", f.l.MaxConnectionIdle, "close (GOAWAY) a connection that has held no RPC for this long")
	fs.IntVar(&f.l.MaxConnections, "max-connections", f.l.MaxConnections, "connections held open at once by all clients; more are closed as soon as accepted")
	fs.IntVar(&f.l.MaxConnectionsPerPeer, "max-connections-per-peer", f.l.MaxConnectionsPerPeer, "connections held open at once by one client IP address")
	fs.UintVar(&f.maxStreams, "max-streams-per-connection", f.maxStreams, "concurrent RPCs one connection may hold (HTTP/2 MAX_CONCURRENT_STREAMS)")
	fs.IntVar(&f.l.MaxRecvMsgSize, "max-message-bytes", f.l.MaxRecvMsgSize, "largest request message accepted")
	fs.IntVar(&f.l.MaxWatches, "max-watches", f.l.MaxWatches, "streaming RPCs (watches) held at once by all clients; more get RESOURCE_EXHAUSTED")
	fs.IntVar(&f.l.MaxWatchesPerPeer, "max-watches-per-peer", f.l.MaxWatchesPerPeer, "watches held at once by one client IP address")
	fs.IntVar(&f.l.MaxRequests, "max-requests", f.l.MaxRequests, "unary RPCs in flight at once, all clients; more get RESOURCE_EXHAUSTED")
	fs.IntVar(&f.l.MaxRequestsPerPeer, "max-requests-per-peer", f.l.MaxRequestsPerPeer, "unary RPCs in flight at once from one client IP address")
	fs.DurationVar(&f.l.RequestTimeout, "request-timeout", f.l.RequestTimeout, "deadline of a unary RPC, receipt of the request included")
}

// limits returns the parsed limits, or an error naming the flag that is
// out of range.
func (f *serverLimitFlags) limits() (grpclimit.Limits, error) {
	l := f.l
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"connection-timeout", l.ConnectionTimeout}, {"keepalive-min-time", l.KeepaliveMinTime},
		{"keepalive-time", l.KeepaliveTime}, {"keepalive-timeout", l.KeepaliveTimeout},
		{"max-connection-idle", l.MaxConnectionIdle}, {"request-timeout", l.RequestTimeout},
	} {
		if d.v <= 0 {
			return l, fmt.Errorf("--%s %s: want a positive duration", d.flag, d.v)
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{
		{"max-message-bytes", l.MaxRecvMsgSize}, {"max-watches", l.MaxWatches}, {"max-watches-per-peer", l.MaxWatchesPerPeer},
		{"max-connections", l.MaxConnections}, {"max-connections-per-peer", l.MaxConnectionsPerPeer},
		{"max-requests", l.MaxRequests}, {"max-requests-per-peer", l.MaxRequestsPerPeer},
	} {
		if n.v <= 0 {
			return l, fmt.Errorf("--%s %d: want a positive number", n.flag, n.v)
		}
	}
	if f.maxStreams == 0 || f.maxStreams > math.MaxUint32 {
		return l, fmt.Errorf("--max-streams-per-connection %d: want 1 to %d", f.maxStreams, uint32(math.MaxUint32))
	}
	if l.MaxWatchesPerPeer > l.MaxWatches {
		return l, fmt.Errorf("--max-watches-per-peer %d is above --max-watches %d", l.MaxWatchesPerPeer, l.MaxWatches)
	}
	if l.MaxRequestsPerPeer > l.MaxRequests {
		return l, fmt.Errorf("--max-requests-per-peer %d is above --max-requests %d", l.MaxRequestsPerPeer, l.MaxRequests)
	}
	if l.MaxConnectionsPerPeer > l.MaxConnections {
		return l, fmt.Errorf("--max-connections-per-peer %d is above --max-connections %d", l.MaxConnectionsPerPeer, l.MaxConnections)
	}
	l.MaxStreamsPerConnection = uint32(f.maxStreams)
	return l, l.Validate()
}

// gracefulStopTimeout bounds how long a controller waits for open streams
// after SIGTERM before closing them.
const gracefulStopTimeout = 10 * time.Second

// newRegistry returns the registry a controller serves on --metrics-addr:
// Go runtime and process metrics, to which the controller adds its
// package's NewPrometheusMetrics and serveGRPC its server limits.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// newMetricsServer serves reg on /metrics, and "ok" on /live and /ready:
// what a controller's --metrics-addr listener answers.
func newMetricsServer(reg *prometheus.Registry) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") }
	mux.HandleFunc("/live", ok)
	mux.HandleFunc("/ready", ok)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}

// grpcServing is what a control-plane component serves: one gRPC server
// with health and reflection, an optional metrics listener, and background
// runners that share its lifetime.
type grpcServing struct {
	// Name starts the log lines: "<Name> listening", "<Name> stopping".
	Name   string
	Addr   string
	Server *grpclimit.Server
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
	if s.Registry != nil {
		srv, w, c := s.Server, s.Server.Watches(), s.Server.Connections()
		s.Registry.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weft_grpc_watches", Help: "Streaming RPCs (watches) open now."},
				func() float64 { return float64(w.InUse()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weft_grpc_watches_refused_total", Help: "Streaming RPCs refused with RESOURCE_EXHAUSTED by the watch limits."},
				func() float64 { return float64(w.Refused()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weft_grpc_connections", Help: "Client connections open now."},
				func() float64 { return float64(c.InUse()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weft_grpc_connections_refused_total", Help: "Client connections closed at accept by the connection limits."},
				func() float64 { return float64(c.Refused()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "weft_grpc_requests", Help: "Unary RPCs in flight now, from their headers to their end."},
				func() float64 { return float64(srv.RequestsInUse()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "weft_grpc_requests_refused_total", Help: "Unary RPCs refused with RESOURCE_EXHAUSTED by the request limits."},
				func() float64 { return float64(srv.RequestsRefused()) }))
	}

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
		metricsSrv = newMetricsServer(reg)
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
