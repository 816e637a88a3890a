package dataplane

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
)

// Option tunes a Proxy.
type Option func(*options)

type options struct {
	log         *slog.Logger
	reg         *prometheus.Registry
	now         func() time.Time
	destIdle    time.Duration
	origDst     func(net.Conn) (netip.AddrPort, error)
	outPolicies OutboundPolicies
	profiles    Profiles
	loopback    bool // see WithLoopbackAllowed
	accessLog   io.Writer
	tracer      trace.Tracer

	// The frame path's test hooks (export_test.go): off, and a call
	// before each call it serves.
	noGRPCFrames bool
	onGRPCFrame  func()
	// onGRPCOutFrame is called for each outbound call the frame path
	// serves (a test hook).
	onGRPCOutFrame func()
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithRegistry makes the proxy register its metrics in reg and serve reg
// on /metrics (default: a registry of its own, with Go and process metrics).
func WithRegistry(reg *prometheus.Registry) Option { return func(o *options) { o.reg = reg } }

// WithClock sets the clock used for certificate checks, by the HTTP
// balancers' latency estimates and failure accrual, and by the inbound
// rate limits' buckets (default time.Now).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithDestinationIdleTimeout sets how long a destination nobody connects to
// keeps its discovery watch (default one minute).
func WithDestinationIdleTimeout(d time.Duration) Option {
	return func(o *options) { o.destIdle = d }
}

// WithOriginalDestination replaces the lookup of a redirected connection's
// original destination (SO_ORIGINAL_DST on Linux). It exists for platforms
// and tests without netfilter; f returns an error for connections that were
// not redirected.
func WithOriginalDestination(f func(net.Conn) (netip.AddrPort, error)) Option {
	return func(o *options) { o.origDst = f }
}

// WithOutboundPolicies sets the source of outbound policies (HTTPRoute and
// GRPCRoute routing, retries, timeouts, failure accrual). Without one,
// requests go to their destination with no retries or timeouts.
func WithOutboundPolicies(src OutboundPolicies) Option {
	return func(o *options) { o.outPolicies = src }
}

// WithAccessLog sets where the access log goes when Config.AccessLog
// names a format (the proxy binary uses stderr, as Linkerd's does). Lines
// are written whole, one Write each, from any goroutine.
func WithAccessLog(w io.Writer) Option { return func(o *options) { o.accessLog = w } }

// WithProfiles sets the source of ServiceProfiles (per-route retries and
// timeouts, retry budget, traffic split). Without one, no profile
// applies.
func WithProfiles(src Profiles) Option { return func(o *options) { o.profiles = src } }

// WithLoopbackAllowed lets inbound connections from loopback addresses
// (127.0.0.0/8, ::1) through whatever the policy, as Linkerd's proxy does:
// in a pod, loopback belongs to the pod, so such a client is one of the
// workload's own processes. The decision is made from the socket's peer
// address alone and reported with reason "loopback".
//
// It is off by default because it is only right where loopback belongs to
// the workload alone: weft-proxy turns it on in a pod, while a proxy that
// shares the host's loopback with others (the local mesh, tests, a host
// without network namespaces) must leave it off, or every local process
// would pass.
func WithLoopbackAllowed() Option { return func(o *options) { o.loopback = true } }

// WithTracer turns distributed tracing on: every HTTP request or gRPC call
// that carries a trace context (W3C traceparent or B3) gets the proxy's
// own span, a server span inbound and a client span outbound, and is sent
// on with that span as its parent. t is usually mesh/dataplane/tracing's
// Tracer, which exports sampled spans over OTLP. Without this option the
// proxy checks one nil pointer per request and does nothing else.
func WithTracer(t trace.Tracer) Option { return func(o *options) { o.tracer = t } }
