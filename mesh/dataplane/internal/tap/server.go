package tap

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/internal/grpcwire"
)

// The tap server: io.linkerd.proxy.tap.Tap/Observe over mutual TLS.
//
// Trust: the client must complete a TLS 1.3 handshake with a certificate
// that chains to the mesh's trust roots for client authentication (the
// same checks as proxy-to-proxy TLS); its identity is the certificate's
// single DNS SAN (ServerConfig.Identity). Only ServerConfig.Identities get past the
// gate (gate.go): any other connection is closed right after its
// handshake, before it holds a connection slot; the handler checks the
// identity again and answers PERMISSION_DENIED should one get through.
// Caps: the gate's handshake stage, maxConns tapper connections, Config.TapMaxTaps+4 streams on one,
// Config.TapMaxTaps open taps (RESOURCE_EXHAUSTED beyond), a 64 KiB
// request that must arrive within requestWait, 64 KiB of request
// headers, a bounded match, and per tap Config.TapMaxEventsPerSecond
// events and a eventBuffer-event buffer. The gRPC side (stream.go) is this
// package's own: one method, grpc-go's answers, a batch in one write.

// maxRequest bounds an ObserveRequest, in bytes.
const maxRequest = 64 << 10

// A tap's goroutine sends events in batches: once one arrives, it sleeps
// batchWait, or until batchMax events wait, while the requests' events
// queue in its buffer, then frames what waits as consecutive gRPC messages
// and writes them in one Write and one Flush (grpcStream.flush). A batch has
// fixed costs, whatever its size: waking the goroutine and HTTP/2's
// writer, a write to the connection, and the tapper's window updates and
// pings to read and answer. At 5 ms they made a tap of every request cost
// the proxy about a quarter more CPU per request at a few hundred requests
// a second (BenchmarkTapProxyCPU); at 50 ms, with a tenth as many batches,
// still 6 to 9%, most of it the stream's per-batch costs
// (BenchmarkTapStreamPaced); at 200 ms there are a quarter as many again.
// Events reach the tapper at most batchWait later: a person watching a
// tap sees its lines arrive in bursts five times a second, and `weft viz
// top` and the dashboard aggregate over seconds. The requests' goroutines wake the
// tap's once per batch, not once per event. Per event, what is left is
// its encoding (wire.go) and 5 bytes of framing: grpc-go's per-message
// stream bookkeeping, queue and DATA frame are gone (docs/decisions.md).
const (
	batchWait = 200 * time.Millisecond
	batchMax  = 256
)

// ServerConfig is what Serve needs besides the hub: the listener's TLS,
// who may tap, and where refusals and events are reported.
type ServerConfig struct {
	// TLS is the listener's TLS: the proxy's certificate, h2 by ALPN, a
	// client certificate required and verified against the mesh roots.
	TLS *tls.Config
	// Identities are the client identities allowed to tap.
	Identities []string
	// Identity names the client of a verified connection ("" for none):
	// the proxy's one rule for reading a peer's identity.
	Identity func(tls.ConnectionState) string
	// HandshakeTimeout bounds a client's TLS handshake
	// (DefaultHandshakeTimeout when not positive).
	HandshakeTimeout time.Duration
	// Refused counts a connection the gate refused, by reason (a fixed
	// set: tcp_refused_total{direction="tap"}).
	Refused func(reason string)
	// Log receives the server's events.
	Log *slog.Logger
}

// Serve serves the tap API on l until ctx ends, for the taps of h. It returns once the
// server has stopped and its handlers returned.
//
// The server is net/http's: its HTTP/2 server is golang.org/x/net/http2's
// (bundled; x/net's own Server is deprecated for it), over TLS with ALPN
// h2 only. Connections reach it through the gate (gate.go): the TLS
// handshake within Config.TapHandshakeTimeout, at most maxHandshakes at
// once and maxHandshakesPerClient from one address, the client's
// identity checked, then one of maxConns slots, which only tappers
// hold. Caps then: TapMaxTaps+4 streams per connection, 64 KiB of request
// headers, a ping after 30 s of silence and the connection closed if
// unanswered in 10 s, an idle connection (no stream) closed after 5
// minutes.
func (h *Hub) Serve(ctx context.Context, l net.Listener, cfg ServerConfig) {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	th := &handler{hub: h, cfg: &cfg}
	gate := newGate(l, &cfg, h)
	var protos http.Protocols
	protos.SetHTTP2(true)
	srv := &http.Server{
		Handler:           th,
		Protocols:         &protos,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: h.maxTaps + 4,
			SendPingTimeout:      30 * time.Second,
			PingTimeout:          10 * time.Second,
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				gate.release(c)
			}
		},
		ErrorLog:    slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	gate.run(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The gate hands over *tls.Conn whose handshake is done: the
		// server sees TLS and ALPN h2 as from its own TLS listener.
		_ = srv.Serve(gate)
	}()
	<-ctx.Done()
	_ = srv.Close() // closes the gate and the connections: their streams' contexts end
	_ = gate.Close()
	<-done
	gate.wait()
	th.mu.Lock()
	th.closed = true
	th.mu.Unlock()
	th.calls.Wait()
}

// handler answers the tap server's HTTP/2 streams.
type handler struct {
	hub    *Hub
	cfg    *ServerConfig
	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup // the handlers running
}

// ServeHTTP checks a stream as grpc-go's server did, in its order, then
// runs the call.
func (t *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.calls.Add(1)
	t.mu.Unlock()
	defer t.calls.Done()
	if r.ProtoMajor != 2 || r.TLS == nil {
		http.Error(w, "dataplane: the tap server speaks gRPC over HTTP/2 with TLS", http.StatusHTTPVersionNotSupported)
		return
	}
	if ct := r.Header.Get("Content-Type"); !grpcwire.IsContentType(ct) {
		grpcwire.EarlyAbort(w, http.StatusUnsupportedMediaType, statusf(codes.InvalidArgument, "invalid gRPC request content-type %q", ct))
		return
	}
	ctx := r.Context()
	if v := r.Header.Get("Grpc-Timeout"); v != "" {
		d, err := grpcwire.ParseTimeout(v)
		if err != nil {
			grpcwire.EarlyAbort(w, http.StatusBadRequest, statusf(codes.Internal, "malformed grpc-timeout: %v", err))
			return
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	if r.Method != http.MethodPost {
		grpcwire.EarlyAbort(w, http.StatusMethodNotAllowed, statusf(codes.Internal, "Received a HEADERS frame with :method %q which should be POST", r.Method))
		return
	}
	s := newGRPCStream(w)
	if r.RequestURI != observePath {
		s.finish(grpcwire.UnknownMethod(r.RequestURI, serviceName))
		return
	}
	if enc := r.Header.Get("Grpc-Encoding"); enc != "" && enc != "identity" {
		s.finish(statusf(codes.Unimplemented, "grpc: Decompressor is not installed for grpc-encoding %q", enc))
		return
	}
	id := t.cfg.Identity(*r.TLS)
	if id == "" || !slices.Contains(t.cfg.Identities, id) {
		t.hub.refused.WithLabelValues("identity").Inc()
		t.cfg.Log.Info("tap refused", "client_id", id)
		s.finish(statusf(codes.PermissionDenied, "dataplane: %q is not an accepted tapper", id))
		return
	}
	deadline := time.Now().Add(requestWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.rc.SetReadDeadline(deadline)
	req, st := readObserveRequest(r)
	if st != nil {
		if ctx.Err() != nil && st.Code == codes.DeadlineExceeded {
			st = statusf(codes.DeadlineExceeded, "dataplane: the call's deadline passed")
		}
		s.finish(st)
		return
	}
	st = (&service{hub: t.hub, log: t.cfg.Log}).Observe(ctx, id, req, s)
	if r.Context().Err() != nil {
		return // the client reset the stream or went away: nothing to say
	}
	s.finish(st)
}

// service runs Observe calls.
type service struct {
	hub *Hub
	log *slog.Logger
}

// Observe streams the events of the requests that match req, for the
// tapper id, until ctx ends or the tap took its limit of requests and all
// of them ended. It returns the status to end the call with (nil: OK).
func (t *service) Observe(ctx context.Context, id string, req *ptap.ObserveRequest, stream *grpcStream) *status {
	h := t.hub
	if req.GetLimit() == 0 {
		h.refused.WithLabelValues("invalid").Inc()
		return statusf(codes.InvalidArgument, "dataplane: limit must be positive")
	}
	m, err := compileMatch(req.GetMatch())
	if err != nil {
		h.refused.WithLabelValues("invalid").Inc()
		return statusf(codes.InvalidArgument, "%s", err.Error())
	}
	headers := req.GetExtract().GetHttp().GetHeaders() != nil
	s := h.newSession(m, headers, req.GetLimit())
	if !h.add(s) {
		h.refused.WithLabelValues("limit").Inc()
		return statusf(codes.ResourceExhausted, "dataplane: %d taps are open, the most this proxy serves", h.maxTaps)
	}
	defer func() {
		s.closed.Store(true)
		h.remove(s)
	}()
	t.log.Info("tap opened", "client_id", id, "limit", req.GetLimit(), "headers", headers)
	ended := func() *status {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return statusf(codes.DeadlineExceeded, "dataplane: the call's deadline passed")
		}
		return statusf(codes.Canceled, "dataplane: the call was canceled")
	}
	var enc encoder
	batch := make([]item, 0, batchMax)
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return ended()
		case it := <-s.events:
			batch = append(batch, it)
		case <-s.idle:
		}
		if len(batch) > 0 {
			// Let the batch gather for batchWait, or until batchMax
			// events wait (send kicks), without taking the events one by
			// one: a request handing its event to a goroutine parked on
			// the channel would wake it, a scheduler round trip per
			// event on the data path; into the buffer it is a copy.
			wait.Reset(batchWait)
			select {
			case <-ctx.Done():
				return ended()
			case <-wait.C:
			case <-s.kick:
			}
			wait.Stop()
			for {
				for len(batch) < batchMax {
					it, ok := s.take()
					if !ok {
						break
					}
					batch = append(batch, it)
				}
				full := len(batch) == batchMax
				// Frame them all, then write them at once: one Write
				// and one Flush, one trip through HTTP/2's writer.
				for _, it := range batch {
					stream.appendMessage(enc.encode(s, it))
					it.done()
				}
				clear(batch) // hold no request past its events
				batch = batch[:0]
				if err := stream.flush(); err != nil {
					if ctx.Err() != nil {
						return ended()
					}
					return statusf(codes.Unavailable, "dataplane: writing tap events: %v", err)
				}
				if !full {
					break
				}
			}
		}
		if s.done() && len(s.events) == 0 {
			return nil
		}
	}
}
