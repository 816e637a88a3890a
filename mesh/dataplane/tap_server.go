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

// A tap's goroutine sends events in batches: once one arrives, it sleeps
// tapBatchWait, or until tapBatchMax events wait, while the requests' events
// queue in its buffer, then sends what waits back to back, which gRPC
// writes to the connection together. A batch has fixed costs, whatever its
// size: waking the goroutine and gRPC's writer, a write to the connection,
// and the tapper's window updates and pings to read and answer. At 5 ms
// they made a tap of every request cost the proxy about a quarter more CPU
// per request at a few hundred requests a second (BenchmarkTapProxyCPU);
// at 50 ms there are a tenth as many batches, and that share fell to about
// a tenth. Events reach the tapper at most tapBatchWait
// later, which a person watching a tap does not notice. The requests'
// goroutines wake the tap's once per batch, not once per event.
const (
	tapBatchWait = 50 * time.Millisecond
	tapBatchMax  = 256
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
	var wires [tapBatchMax]tapWire
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
			// Let the batch gather for tapBatchWait, or until tapBatchMax
			// events wait (send kicks), without taking the events one by
			// one: a request handing its event to a goroutine parked on
			// the channel would wake it, a scheduler round trip per
			// event on the data path; into the buffer it is a copy.
			wait.Reset(tapBatchWait)
			select {
			case <-ctx.Done():
				return nil
			case <-wait.C:
			case <-s.kick:
			}
			wait.Stop()
			for {
				for len(batch) < tapBatchMax {
					it, ok := s.take()
					if !ok {
						break
					}
					batch = append(batch, it)
				}
				full := len(batch) == tapBatchMax
				// Encode them all, then send them all: the sends come
				// back to back, so gRPC's writer finds them queued
				// together and writes them to the connection at once.
				for i, it := range batch {
					wires[i] = slab.wire(enc.encode(s, it))
				}
				clear(batch) // hold no request past its events
				for i := range len(batch) {
					if err := stream.SendMsg(&wires[i]); err != nil {
						return err
					}
				}
				batch = batch[:0]
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
