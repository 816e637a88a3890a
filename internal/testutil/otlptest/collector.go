// Package otlptest is an OpenTelemetry trace collector for tests: a real
// OTLP/gRPC TraceService server (go.opentelemetry.io/proto/otlp's) on a
// loopback port that keeps every span it receives, so that a test can
// wait for the spans a proxy exports and read them as the collector got
// them.
package otlptest

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Span is one span the collector received, with the attributes of the
// resource it came with.
type Span struct {
	*tracepb.Span
	Resource map[string]string
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.GetTraceId()) }

// SpanID is the span's own id in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.Span.GetSpanId()) }

// ParentID is the span's parent id in hex ("" for a root span).
func (s Span) ParentID() string { return hex.EncodeToString(s.Span.GetParentSpanId()) }

// Attr returns the span attribute key as text ("" when absent).
func (s Span) Attr(key string) string { return AttrValue(s.Span.GetAttributes(), key) }

// Collector receives OTLP/gRPC trace exports.
type Collector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string
	srv  *grpc.Server
	done chan struct{} // closed when the server has returned

	mu      sync.Mutex
	spans   []Span
	exports int
	peers   []string      // per TLS connection accepted: the client certificate's first DNS name, "" without one
	changed chan struct{} // closed (and replaced) whenever spans arrive
}

// Start starts a plaintext collector on a loopback port; it stops when
// the test ends.
func Start(t testing.TB) *Collector { return start(t, nil) }

// StartTLS starts a collector behind a TLS terminator with cfg (its
// certificate, and the client certificates it asks for), as a meshed
// collector is behind its proxy: the TLS session carries no ALPN, and the
// gRPC server sees plaintext HTTP/2. Peers then names the clients.
func StartTLS(t testing.TB, cfg *tls.Config) *Collector { return start(t, cfg) }

func start(t testing.TB, cfg *tls.Config) *Collector {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("otlptest: listen: %v", err)
	}
	c := serve(raw, cfg)
	t.Cleanup(c.Stop)
	return c
}

// Serve starts a plaintext collector on ln, for a program rather than a
// test (the cluster suite's testapp runs one in a pod, where the pod's
// proxy terminates mesh TLS in front of it). Stop ends it.
func Serve(ln net.Listener) *Collector { return serve(ln, nil) }

func serve(raw net.Listener, cfg *tls.Config) *Collector {
	c := &Collector{addr: raw.Addr().String(), srv: grpc.NewServer(), changed: make(chan struct{}), done: make(chan struct{})}
	ln := raw
	if cfg != nil {
		ln = &tlsListener{Listener: raw, cfg: cfg, c: c}
	}
	collectortrace.RegisterTraceServiceServer(c.srv, c)
	go func() {
		defer close(c.done)
		_ = c.srv.Serve(ln)
	}()
	return c
}

// Stop closes the collector's listener and connections and returns when
// its server has ended.
func (c *Collector) Stop() {
	c.srv.Stop()
	<-c.done
}

// Addr is the collector's HOST:PORT.
func (c *Collector) Addr() string { return c.addr }

// tlsListener completes the TLS handshake of each connection before the
// gRPC server gets it, and records the client's name; a failed handshake
// closes the connection and is not handed on.
type tlsListener struct {
	net.Listener
	cfg *tls.Config
	c   *Collector
}

func (l *tlsListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := tls.Server(conn, l.cfg)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			continue
		}
		_ = tc.SetDeadline(time.Time{})
		name := ""
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 && len(certs[0].DNSNames) > 0 {
			name = certs[0].DNSNames[0]
		}
		l.c.mu.Lock()
		l.c.peers = append(l.c.peers, name)
		l.c.mu.Unlock()
		return tc, nil
	}
}

// Export implements the TraceService.
func (c *Collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			res[kv.GetKey()] = anyText(kv.GetValue())
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{Span: s, Resource: res})
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.exports++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Peers returns, for each TLS connection accepted (StartTLS), the DNS name
// of the client's certificate ("" for a client without one).
func (c *Collector) Peers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.peers...)
}

// Exports counts the export calls received.
func (c *Collector) Exports() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exports
}

// WaitSpans waits until at least n spans have arrived and returns them
// all, or fails when ctx ends first.
func (c *Collector) WaitSpans(ctx context.Context, n int) ([]Span, error) {
	for {
		c.mu.Lock()
		have, ch := len(c.spans), c.changed
		c.mu.Unlock()
		if have >= n {
			return c.Spans(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return c.Spans(), fmt.Errorf("otlptest: %d of %d spans arrived: %w", have, n, ctx.Err())
		}
	}
}

// AttrValue returns the attribute key of kvs as text ("" when absent).
func AttrValue(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() == key {
			return anyText(kv.GetValue())
		}
	}
	return ""
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.String()
}
