package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Defaults of [Limits]. They are sized for a cluster of thousands of
// proxies that each hold a few watches on every controller; docs/limits.md
// gives the reasoning for each.
const (
	// DefaultConnectionTimeout bounds the handshake of a new connection:
	// TLS (when served) and the HTTP/2 preface and settings. A client that
	// connects and says nothing is disconnected after it.
	DefaultConnectionTimeout = 10 * time.Second
	// DefaultKeepaliveMinTime is the shortest interval between client
	// pings the server tolerates; a client pinging faster is disconnected
	// (GOAWAY "too_many_pings"). Clients that ping every 10 s, with
	// jitter, stay well clear of it.
	DefaultKeepaliveMinTime = 5 * time.Second
	// DefaultKeepaliveTime is how long a connection may stay silent
	// before the server pings it; DefaultKeepaliveTimeout is how long it
	// then waits for the answer before closing the connection. Together
	// they drop peers that vanished without closing their sockets.
	DefaultKeepaliveTime    = 30 * time.Second
	DefaultKeepaliveTimeout = 10 * time.Second
	// DefaultMaxConnections is how many connections the server holds open
	// at once, across all clients: a proxy holds one to each controller,
	// so 2,000 proxies on one replica (the sizing of DefaultMaxWatches)
	// need 2,000, with room for reconnections. A connection costs some
	// 10 to 30 KiB of buffers and goroutine stacks (docs/benchmarks.md).
	DefaultMaxConnections = 5000
	// DefaultMaxConnectionsPerPeer is how many of them one peer address
	// may hold: a proxy needs one or two per controller; pods sharing a
	// node's address (hostNetwork) or one NAT share the budget.
	DefaultMaxConnectionsPerPeer = 100
	// DefaultMaxConnectionIdle closes (with GOAWAY) a connection that has
	// held no RPC for that long. Clients reconnect when they need to.
	DefaultMaxConnectionIdle = 5 * time.Minute
	// DefaultMaxStreamsPerConnection is the HTTP/2 SETTINGS value
	// MAX_CONCURRENT_STREAMS: the RPCs one connection may have open. A
	// gateway proxy holds two destination streams per target service.
	DefaultMaxStreamsPerConnection = 10000
	// DefaultMaxRecvMsgSize is the largest request message, in bytes. The
	// proxy API's requests are small (a CSR and a token: a few KiB).
	DefaultMaxRecvMsgSize = 64 << 10
	// DefaultMaxWatches is how many streaming RPCs (watches) the server
	// holds at once, across all clients: 2,000 proxies with 10 watches
	// each on one replica. At about 11 KiB of heap and stack per watch
	// (docs/benchmarks.md) that is some 220 MiB.
	DefaultMaxWatches = 20000
	// DefaultMaxWatchesPerPeer is how many of them one peer address may
	// hold, so one client cannot take the whole budget: a gateway proxy
	// routing to 1,000 services at once holds 2,000 destination watches.
	DefaultMaxWatchesPerPeer = 2000
	// DefaultMaxRequests is how many unary RPCs (every stream that is not
	// a registered streaming method) the server holds at once, from their
	// headers to their end, across all clients; each lasts at most
	// RequestTimeout. DefaultMaxRequestsPerPeer is how many of them one
	// peer address may hold: a proxy has a few in flight at most (a
	// Certify, a GetPort per port at start).
	DefaultMaxRequests        = 10000
	DefaultMaxRequestsPerPeer = 1000
	// DefaultRequestTimeout is the deadline of a unary RPC on the server,
	// counted from the moment its headers arrive: the request message must
	// arrive and the answer be computed within it.
	DefaultRequestTimeout = 10 * time.Second
)

// Limits are what one client may hold on a control-plane gRPC server. The
// zero value of a field is not "unlimited": use [Defaults] and change the
// fields you need. [Limits.Validate] refuses a zero or negative value.
type Limits struct {
	ConnectionTimeout       time.Duration
	KeepaliveMinTime        time.Duration
	KeepaliveTime           time.Duration
	KeepaliveTimeout        time.Duration
	MaxConnectionIdle       time.Duration
	MaxConnections          int
	MaxConnectionsPerPeer   int
	MaxStreamsPerConnection uint32
	MaxRecvMsgSize          int
	MaxWatches              int
	MaxWatchesPerPeer       int
	MaxRequests             int
	MaxRequestsPerPeer      int
	RequestTimeout          time.Duration
}

// Defaults returns the default limits.
func Defaults() Limits {
	return Limits{
		ConnectionTimeout:       DefaultConnectionTimeout,
		KeepaliveMinTime:        DefaultKeepaliveMinTime,
		KeepaliveTime:           DefaultKeepaliveTime,
		KeepaliveTimeout:        DefaultKeepaliveTimeout,
		MaxConnectionIdle:       DefaultMaxConnectionIdle,
		MaxConnections:          DefaultMaxConnections,
		MaxConnectionsPerPeer:   DefaultMaxConnectionsPerPeer,
		MaxStreamsPerConnection: DefaultMaxStreamsPerConnection,
		MaxRecvMsgSize:          DefaultMaxRecvMsgSize,
		MaxWatches:              DefaultMaxWatches,
		MaxWatchesPerPeer:       DefaultMaxWatchesPerPeer,
		MaxRequests:             DefaultMaxRequests,
		MaxRequestsPerPeer:      DefaultMaxRequestsPerPeer,
		RequestTimeout:          DefaultRequestTimeout,
	}
}

// Validate reports the first limit that is not positive, or a per-peer
// limit above the global one.
func (l Limits) Validate() error {
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"connection timeout", l.ConnectionTimeout},
		{"keepalive minimum time", l.KeepaliveMinTime},
		{"keepalive time", l.KeepaliveTime},
		{"keepalive timeout", l.KeepaliveTimeout},
		{"maximum connection idle time", l.MaxConnectionIdle},
		{"request timeout", l.RequestTimeout},
	}
	for _, d := range durations {
		if d.d <= 0 {
			return fmt.Errorf("grpclimit: %s %s is not positive", d.name, d.d)
		}
	}
	switch {
	case l.MaxRequests <= 0:
		return fmt.Errorf("grpclimit: maximum requests %d is not positive", l.MaxRequests)
	case l.MaxRequestsPerPeer <= 0:
		return fmt.Errorf("grpclimit: maximum requests per peer %d is not positive", l.MaxRequestsPerPeer)
	case l.MaxRequestsPerPeer > l.MaxRequests:
		return fmt.Errorf("grpclimit: maximum requests per peer %d is above the maximum requests %d", l.MaxRequestsPerPeer, l.MaxRequests)
	case l.MaxConnections <= 0:
		return fmt.Errorf("grpclimit: maximum connections %d is not positive", l.MaxConnections)
	case l.MaxConnectionsPerPeer <= 0:
		return fmt.Errorf("grpclimit: maximum connections per peer %d is not positive", l.MaxConnectionsPerPeer)
	case l.MaxConnectionsPerPeer > l.MaxConnections:
		return fmt.Errorf("grpclimit: maximum connections per peer %d is above the maximum connections %d", l.MaxConnectionsPerPeer, l.MaxConnections)
	case l.MaxStreamsPerConnection == 0:
		return errors.New("grpclimit: maximum streams per connection is zero")
	case l.MaxRecvMsgSize <= 0:
		return fmt.Errorf("grpclimit: maximum message size %d is not positive", l.MaxRecvMsgSize)
	case l.MaxWatches <= 0:
		return fmt.Errorf("grpclimit: maximum watches %d is not positive", l.MaxWatches)
	case l.MaxWatchesPerPeer <= 0:
		return fmt.Errorf("grpclimit: maximum watches per peer %d is not positive", l.MaxWatchesPerPeer)
	case l.MaxWatchesPerPeer > l.MaxWatches:
		return fmt.Errorf("grpclimit: maximum watches per peer %d is above the maximum watches %d", l.MaxWatchesPerPeer, l.MaxWatches)
	}
	return nil
}

// Server is a grpc.Server built by [NewServer]: use it as one, register
// services on it and serve it on a listener the caller owns.
type Server struct {
	*grpc.Server
	watches  *Watches
	requests *counter
	conns    *Connections
}

// RequestsInUse returns the unary RPCs in flight now, and
// RequestsRefused how many were refused since the start.
func (s *Server) RequestsInUse() int { return s.requests.inUse() }

// RequestsRefused returns how many unary RPCs were refused with
// RESOURCE_EXHAUSTED by the request caps since the start.
func (s *Server) RequestsRefused() uint64 { return s.requests.refused.Load() }

// Watches returns the watch limiter of the server, to read its counters.
func (s *Server) Watches() *Watches { return s.watches }

// Connections returns the connection limiter of the server, to read its
// counters.
func (s *Server) Connections() *Connections { return s.conns }

// Serve serves lis, as grpc.Server.Serve does, under the connection caps
// (MaxConnections, MaxConnectionsPerPeer): a connection beyond them is
// closed as soon as it is accepted. The caller still owns lis.
func (s *Server) Serve(lis net.Listener) error {
	return s.Server.Serve(s.conns.Listener(lis))
}

// NewServer returns a grpc.Server that enforces l. opts are added after
// the limits' own options (credentials, interceptors, a stats handler); a
// stream interceptor in opts runs after the watch limit. The server owns
// the tap handle (grpc.InTapHandle), which enforces the request timeout:
// opts must not set another.
func NewServer(l Limits, opts ...grpc.ServerOption) (*Server, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	s := &Server{watches: NewWatches(l.MaxWatches, l.MaxWatchesPerPeer), conns: NewConnections(l.MaxConnections, l.MaxConnectionsPerPeer)}
	s.requests = newCounter(l.MaxRequests, l.MaxRequestsPerPeer)
	deadline := &unaryDeadline{timeout: l.RequestTimeout, requests: s.requests}
	all := append([]grpc.ServerOption{
		grpc.ConnectionTimeout(l.ConnectionTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:              l.KeepaliveTime,
			Timeout:           l.KeepaliveTimeout,
			MaxConnectionIdle: l.MaxConnectionIdle,
		}),
		grpc.MaxConcurrentStreams(l.MaxStreamsPerConnection),
		grpc.MaxRecvMsgSize(l.MaxRecvMsgSize),
		grpc.ChainStreamInterceptor(s.watches.StreamServerInterceptor()),
		grpc.InTapHandle(deadline.tap),
	}, opts...)
	s.Server = grpc.NewServer(all...)
	deadline.server = s.Server
	return s, nil
}

// unaryDeadline puts the request timeout on every stream that is not a
// registered streaming method, from the moment its headers arrive, and
// counts such streams against the request caps until they end. It works
// in the tap handle because that is the only hook that runs before gRPC
// waits for the request message: an interceptor runs after it, so a
// client that sends half a request would hold its stream forever, and
// uncounted.
type unaryDeadline struct {
	timeout  time.Duration
	server   *grpc.Server
	requests *counter

	once    sync.Once
	streams map[string]bool
}

func (u *unaryDeadline) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	// Services are registered before Serve, and the tap only runs once
	// Serve accepted a connection, so the table is complete here.
	u.once.Do(func() {
		u.streams = map[string]bool{}
		for svc, si := range u.server.GetServiceInfo() {
			for _, m := range si.Methods {
				if m.IsClientStream || m.IsServerStream {
					u.streams["/"+svc+"/"+m.Name] = true
				}
			}
		}
	})
	if u.streams[info.FullMethodName] {
		return ctx, nil
	}
	release, err := u.requests.acquire(peerKey(ctx), func(which string, n int) error {
		return status.Errorf(codes.ResourceExhausted, "grpclimit: %s refused: %s holds its maximum of %d requests in flight; retry later", info.FullMethodName, which, n)
	})
	if err != nil {
		return nil, err
	}
	// ctx is the stream's: gRPC cancels it when the stream ends, however
	// it ends.
	context.AfterFunc(ctx, release)
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= u.timeout {
		return ctx, nil
	}
	// The new context is a child of the stream's, which gRPC cancels when
	// the stream ends; that stops the timer, so cancel is not needed.
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	_ = cancel
	return ctx, nil
}
