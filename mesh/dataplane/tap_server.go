package dataplane

import (
	"context"
	"crypto/tls"
	"net"
	"slices"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
)

// The tap server: io.linkerd.proxy.tap.Tap/Observe over mutual TLS.
//
// Trust: the client must complete a TLS 1.3 handshake with a certificate
// that chains to the mesh's trust roots for client authentication (the
// same checks as proxy-to-proxy TLS); its identity is the certificate's
// single DNS SAN. Only identities in Config.TapIdentities may call
// Observe; any other gets PERMISSION_DENIED before its request is read.
// Caps: tapMaxConns connections, Config.TapMaxTaps open taps
// (RESOURCE_EXHAUSTED beyond), a 64 KiB request, a bounded match, and per
// tap Config.TapMaxEventsPerSecond events and a tapBuffer-event buffer.

// tapMaxRequest bounds an ObserveRequest, in bytes.
const tapMaxRequest = 64 << 10

// A tap's goroutine sends events in batches: once one arrives, it waits up
// to tapBatchWait for more, up to tapBatchMax, then sends them back to
// back, which gRPC writes to the connection together. Events reach the
// tapper at most tapBatchWait later; a busy tap makes one write per batch
// instead of one per event (the write was most of an event's cost).
const (
	tapBatchWait = 5 * time.Millisecond
	tapBatchMax  = 64
)

// tapServerTLS is the tap listener's TLS: the proxy's certificate, a
// client certificate required and verified against the mesh roots.
func tapServerTLS(id Identity, now func() time.Time) *tls.Config {
	c := ServerTLSConfig(id, now)
	c.NextProtos = []string{"h2"}
	c.ClientAuth = tls.RequireAnyClientCert // verified in VerifyConnection, against the current roots
	return c
}

// tapIdentityOf returns the verified identity of the caller of a tap
// request, from the gRPC peer's TLS state.
func tapIdentityOf(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ""
	}
	return PeerIdentity(ti.State)
}

// serveTap serves the tap API on l until ctx ends. It returns once the
// server has stopped.
func (p *Proxy) serveTap(ctx context.Context, l net.Listener) {
	allowed := p.cfg.TapIdentities
	auth := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		id := tapIdentityOf(ss.Context())
		if id == "" || !slices.Contains(allowed, id) {
			p.tap.refused.WithLabelValues("identity").Inc()
			p.log.Info("tap refused", "client_id", id)
			return status.Errorf(codes.PermissionDenied, "dataplane: %q is not an accepted tapper", id)
		}
		return handler(srv, ss)
	}
	unary := func(context.Context, any, *grpc.UnaryServerInfo, grpc.UnaryHandler) (any, error) {
		return nil, status.Error(codes.Unimplemented, "dataplane: the tap server has no unary methods")
	}
	codec, err := newTapCodec()
	if err != nil {
		p.log.Error("tap server not started", "err", err)
		<-ctx.Done()
		return
	}
	srv := grpc.NewServer(
		grpc.ForceServerCodecV2(codec),
		grpc.Creds(credentials.NewTLS(tapServerTLS(p.id, p.now))),
		grpc.StreamInterceptor(auth),
		grpc.UnaryInterceptor(unary),
		grpc.MaxRecvMsgSize(tapMaxRequest),
		grpc.MaxConcurrentStreams(uint32(p.cfg.TapMaxTaps)+4),
		grpc.ConnectionTimeout(10*time.Second),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	ptap.RegisterTapServer(srv, &tapService{p: p})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(netutil.LimitListener(l, tapMaxConns))
	}()
	<-ctx.Done()
	srv.Stop()
	<-done
}

// tapService implements the Tap API.
type tapService struct {
	ptap.UnimplementedTapServer
	p *Proxy
}

// Observe streams the events of the requests that match, until the
// client goes away or the tap took limit requests and all of them ended.
func (t *tapService) Observe(req *ptap.ObserveRequest, stream grpc.ServerStreamingServer[ptap.TapEvent]) error {
	h := t.p.tap
	if req.GetLimit() == 0 {
		h.refused.WithLabelValues("invalid").Inc()
		return status.Error(codes.InvalidArgument, "dataplane: limit must be positive")
	}
	m, err := compileMatch(req.GetMatch())
	if err != nil {
		h.refused.WithLabelValues("invalid").Inc()
		return status.Error(codes.InvalidArgument, err.Error())
	}
	headers := req.GetExtract().GetHttp().GetHeaders() != nil
	s := h.newSession(m, headers, req.GetLimit())
	if !h.add(s) {
		h.refused.WithLabelValues("limit").Inc()
		return status.Errorf(codes.ResourceExhausted, "dataplane: %d taps are open, the most this proxy serves", h.maxTaps)
	}
	defer func() {
		s.closed.Store(true)
		h.remove(s)
	}()
	t.p.log.Info("tap opened", "client_id", tapIdentityOf(stream.Context()), "limit", req.GetLimit(), "headers", headers)
	ctx := stream.Context()
	var enc tapEncoder
	var slab tapSlab
	batch := make([]tapItem, 0, tapBatchMax)
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case it := <-s.events:
			batch = append(batch, it)
		case <-s.idle:
		}
		if len(batch) > 0 {
			// Gather what comes within tapBatchWait, so that a busy tap
			// writes its events to the connection a batch at a time
			// rather than one write per event.
			wait.Reset(tapBatchWait)
		gather:
			for len(batch) < tapBatchMax {
				select { // what is queued already, without the timer
				case it := <-s.events:
					batch = append(batch, it)
					continue
				default:
				}
				select {
				case <-ctx.Done():
					return nil
				case it := <-s.events:
					batch = append(batch, it)
				case <-wait.C:
					break gather
				}
			}
			wait.Stop()
			for _, it := range batch {
				wire := slab.wire(enc.encode(s, it))
				if err := stream.SendMsg(&wire); err != nil {
					return err
				}
			}
			clear(batch) // hold no request past its events
			batch = batch[:0]
		}
		if s.done() && len(s.events) == 0 {
			return nil
		}
	}
}
