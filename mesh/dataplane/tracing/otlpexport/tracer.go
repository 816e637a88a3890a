package otlpexport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/internal/envcheck"
	"github.com/weftmesh/weft/mesh/dataplane/internal/trace"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

// Tracer records the proxy's spans and exports the sampled ones. It
// implements the seam mesh/dataplane's WithTracer takes. Build it with
// New; Shutdown flushes and stops it.
type Tracer struct {
	tp       *sdktrace.TracerProvider
	tr       oteltrace.Tracer
	shutOnce sync.Once
	shutErr  error
}

// Option tunes a Tracer.
type Option func(*options)

type options struct {
	exportTimeout time.Duration
	batchTimeout  time.Duration
	retryFor      time.Duration
	meshID        dataplane.Identity
	collectorID   string
}

// WithMeshTLS exports over mesh TLS: the proxy presents its certificate
// from id, and the collector's side (its proxy, when the collector is
// meshed) must present collectorID, checked against id's current roots as
// between any two proxies. The session carries no transport header: the
// collector's inbound proxy finds the gRPC inside by detection, as for
// any meshed client of a port, and hands it the proxy's identity for its
// policy. Without this option spans go in plaintext.
func WithMeshTLS(id dataplane.Identity, collectorID string) Option {
	return func(o *options) { o.meshID, o.collectorID = id, collectorID }
}

// WithExportTimeout bounds one export of a batch to the collector, its
// retries included (default 10s); past it the batch is dropped.
func WithExportTimeout(d time.Duration) Option { return func(o *options) { o.exportTimeout = d } }

// WithBatchTimeout is how long an ended span may wait for its batch to
// fill before the batch is exported anyway (default 5s).
func WithBatchTimeout(d time.Duration) Option { return func(o *options) { o.batchTimeout = d } }

// WithRetryFor bounds how long a failed export is retried (default 10s,
// within the export timeout; 0 turns retries off).
func WithRetryFor(d time.Duration) Option { return func(o *options) { o.retryFor = d } }

// New builds a Tracer exporting to cfg.CollectorAddr over OTLP/gRPC. ctx
// bounds the start only: New does not wait for the collector (it is
// dialled when the first batch goes out), so a collector that is down at
// start costs spans, not the proxy's start.
func New(ctx context.Context, cfg tracing.Config, opts ...Option) (*Tracer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("otlpexport: %w", err)
	}
	if cfg.CollectorAddr == "" {
		return nil, errors.New("otlpexport: no collector address")
	}
	if err := envcheck.HostPort(cfg.CollectorAddr, false); err != nil {
		return nil, fmt.Errorf("otlpexport: collector address %q: %w", cfg.CollectorAddr, err)
	}
	o := options{exportTimeout: 10 * time.Second, batchTimeout: 5 * time.Second, retryFor: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	queue := cfg.MaxQueueSize
	if queue <= 0 {
		queue = tracing.DefaultMaxQueueSize
	}
	retry := otlptracegrpc.RetryConfig{Enabled: o.retryFor > 0, InitialInterval: time.Second, MaxInterval: 5 * time.Second, MaxElapsedTime: o.retryFor}
	expOpts := []otlptracegrpc.Option{
		otlptracegrpc.WithEndpoint(cfg.CollectorAddr),
		// gRPC's own transport security stays off: with WithMeshTLS the
		// connection is mesh TLS below it (meshDialer).
		otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithTimeout(o.exportTimeout),
		otlptracegrpc.WithRetry(retry),
	}
	if o.meshID != nil {
		if err := envcheck.DNSName(o.collectorID); err != nil {
			return nil, fmt.Errorf("otlpexport: collector identity %q: %w", o.collectorID, err)
		}
		expOpts = append(expOpts, otlptracegrpc.WithDialOption(grpc.WithContextDialer(meshDialer(o.meshID, o.collectorID))))
	}
	exp, err := otlptracegrpc.New(ctx, expOpts...)
	if err != nil {
		return nil, fmt.Errorf("otlpexport: exporter for %s: %w", cfg.CollectorAddr, err)
	}
	bsp := sdktrace.NewBatchSpanProcessor(exp,
		sdktrace.WithMaxQueueSize(queue),
		sdktrace.WithMaxExportBatchSize(min(512, queue)),
		sdktrace.WithBatchTimeout(o.batchTimeout),
		sdktrace.WithExportTimeout(o.exportTimeout),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(bsp),
		// The proxy joins traces and never starts one: the caller's
		// decision is the only one.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithResource(resourceOf(cfg)),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("github.com/weftmesh/weft/mesh/dataplane")}, nil
}

// meshDialer dials the collector and completes mesh TLS with it, the
// collector's side presenting collectorID. No ALPN is offered: a peer
// proxy reads an offered transport ALPN as the promise of a transport
// header, and gRPC's "h2" is not among the protocols a proxy accepts.
func meshDialer(id dataplane.Identity, collectorID string) func(context.Context, string) (net.Conn, error) {
	cfg := dataplane.ClientTLSConfig(id, collectorID, nil)
	cfg.NextProtos = nil
	return func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, fmt.Errorf("otlpexport: mesh TLS with the collector %s: %w", addr, err)
		}
		return tc, nil
	}
}

// resourceOf is the resource naming the proxy in every batch.
func resourceOf(cfg tracing.Config) *resource.Resource {
	name := cfg.ServiceName
	if name == "" {
		name = tracing.DefaultServiceName
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", name),
		attribute.Int("process.pid", os.Getpid()),
	}
	if h, err := os.Hostname(); err == nil {
		attrs = append(attrs, attribute.String("host.name", h))
	}
	if cfg.Pod != "" {
		attrs = append(attrs, attribute.String("k8s.pod.name", cfg.Pod))
	}
	if cfg.Namespace != "" {
		attrs = append(attrs, attribute.String("k8s.namespace.name", cfg.Namespace))
	}
	keys := make([]string, 0, len(cfg.Attributes))
	for k := range cfg.Attributes {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same resource every time
	for _, k := range keys {
		attrs = append(attrs, attribute.String(k, cfg.Attributes[k])) // the settings' key wins over the proxy's of the same name
	}
	return resource.NewSchemaless(attrs...)
}

// Start begins the proxy's span for r as a child of parent (see
// trace.Tracer).
func (t *Tracer) Start(parent trace.Context, kind trace.Kind, r *http.Request) trace.Span {
	var flags oteltrace.TraceFlags
	if parent.Sampled {
		flags = oteltrace.FlagsSampled
	}
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID:    oteltrace.TraceID(parent.TraceID),
		SpanID:     oteltrace.SpanID(parent.SpanID),
		TraceFlags: flags,
		Remote:     true,
	})
	sk := oteltrace.SpanKindClient
	if kind == trace.Server {
		sk = oteltrace.SpanKindServer
	}
	ctx := oteltrace.ContextWithRemoteSpanContext(context.Background(), sc)
	_, s := t.tr.Start(ctx, spanName(r), oteltrace.WithSpanKind(sk))
	if s.IsRecording() {
		for _, a := range trace.RequestAttributes(r, kind) {
			s.SetAttributes(kv(a))
		}
	}
	return span{s}
}

// spanName is the request's method and path, as OpenTelemetry names HTTP
// spans without a route template ("GET /items/17").
func spanName(r *http.Request) string {
	p := r.URL.Path
	if p == "" {
		p = "/"
	}
	return r.Method + " " + p
}

func kv(a trace.Attribute) attribute.KeyValue {
	if a.IsInt {
		return attribute.Int64(a.Key, a.Int)
	}
	return attribute.String(a.Key, a.Value)
}

type span struct{ s oteltrace.Span }

func (s span) ID() trace.SpanID { return trace.SpanID(s.s.SpanContext().SpanID()) }

func (s span) End(status int, grpcStatus string, errClass string) {
	if s.s.IsRecording() {
		if status > 0 {
			s.s.SetAttributes(attribute.Int(trace.AttrStatusCode, status))
		}
		if n, err := strconv.Atoi(grpcStatus); err == nil {
			s.s.SetAttributes(attribute.Int(trace.AttrGRPCStatus, n))
		}
		switch {
		case errClass != "":
			s.s.SetAttributes(attribute.String(trace.AttrErrorType, errClass))
			s.s.SetStatus(codes.Error, errClass)
		case status >= 500:
			s.s.SetStatus(codes.Error, "")
		}
	}
	s.s.End()
}

// ForceFlush exports every span ended so far, within ctx.
func (t *Tracer) ForceFlush(ctx context.Context) error {
	if err := t.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("otlpexport: flush: %w", err)
	}
	return nil
}

// Shutdown exports what is queued (within ctx) and stops the exporter.
// Spans ended afterwards are dropped. It is idempotent.
func (t *Tracer) Shutdown(ctx context.Context) error {
	t.shutOnce.Do(func() {
		if err := t.tp.Shutdown(ctx); err != nil {
			t.shutErr = fmt.Errorf("otlpexport: shutdown: %w", err)
		}
	})
	return t.shutErr
}
