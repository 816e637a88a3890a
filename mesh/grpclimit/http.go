package grpclimit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"

	"google.golang.org/grpc/codes"

	"github.com/weftmesh/weft/mesh/internal/grpcwire"
)

// Serving on Go's HTTP/2 server. A method served by an http.Handler of
// its own (identity's Certify: identity.Service.Handler) skips grpc-go's
// transport, whose per-call cost is most of a cheap unary call's
// (docs/decisions.md); the other services of the port (health,
// reflection) are served by the same grpc.Server through its ServeHTTP.
// Every limit of [Limits] holds on both, enforced by net/http instead of
// grpc-go where it is per connection:
//
//   - ConnectionTimeout: the TLS handshake (ReadHeaderTimeout); the
//     HTTP/2 preface has net/http's own 10 s.
//   - MaxConnections, MaxConnectionsPerPeer: [Server.ServeHTTP2] wraps the
//     listener, as [Server.Serve] does.
//   - KeepaliveTime, KeepaliveTimeout: HTTP2Config.SendPingTimeout and
//     PingTimeout. MaxConnectionIdle: IdleTimeout (GOAWAY once a
//     connection has held no stream for that long).
//   - KeepaliveMinTime is not enforced: net/http has no ping-rate policy.
//     Its HTTP/2 server answers pings from its writer and closes a
//     connection whose client does not read the answers (a queue of
//     10,000 control frames); a client that pings fast and reads costs
//     the server one small write per ping (docs/limits.md).
//   - MaxStreamsPerConnection: HTTP2Config.MaxConcurrentStreams.
//   - MaxRecvMsgSize: the lean handler's cap (the caller passes it), and
//     grpc-go's for the rest.
//   - MaxRequests, MaxRequestsPerPeer, RequestTimeout: the handler
//     returned by HTTPHandler counts every unary call and gives it the
//     request timeout before any handler runs, as the tap handle does on
//     grpc-go's transport. MaxWatches: the stream interceptor, which
//     grpc-go runs under ServeHTTP too.
//   - Request headers: at most net/http's 1 MiB (grpc-go allowed 16 MiB).

// HTTPHandler returns the handler of an HTTP/2 server serving s: the
// paths in lean by their handlers, everything else by the grpc.Server.
// Every call that is not a registered streaming method counts against the
// request caps (RESOURCE_EXHAUSTED beyond, before its request is read) and
// runs under RequestTimeout from its headers; the client's grpc-timeout,
// when shorter, is the handlers' to apply.
func (s *Server) HTTPHandler(lean map[string]http.Handler) http.Handler {
	return &httpGate{s: s, lean: lean}
}

type httpGate struct {
	s    *Server
	lean map[string]http.Handler
}

func (g *httpGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if !g.s.deadline.streaming(path) {
		release, err := g.s.deadline.acquire(addrKey(strAddr(r.RemoteAddr)), path)
		if err != nil {
			grpcwire.NewResponse(w).Finish(&grpcwire.Status{Code: codes.ResourceExhausted, Message: err.Error()})
			return
		}
		defer release()
		ctx, cancel := context.WithTimeout(r.Context(), g.s.limits.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	if h, ok := g.lean[path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	g.s.Server.ServeHTTP(w, r)
}

// strAddr is a peer address as net/http gives it (host:port).
type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

// NewHTTPServer returns an http.Server that serves h over HTTP/2 only,
// with the per-connection limits of s: over TLS with ALPN h2 when
// tlsConfig is not nil, otherwise unencrypted HTTP/2 with prior knowledge
// (as gRPC clients speak it). The caller may set ErrorLog and BaseContext
// before serving it with [Server.ServeHTTP2].
func (s *Server) NewHTTPServer(h http.Handler, tlsConfig *tls.Config) *http.Server {
	l := s.limits
	var protos http.Protocols
	if tlsConfig != nil {
		tlsConfig = tlsConfig.Clone()
		tlsConfig.NextProtos = []string{"h2"}
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		Protocols:         &protos,
		ReadHeaderTimeout: l.ConnectionTimeout,
		IdleTimeout:       l.MaxConnectionIdle,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: int(min(l.MaxStreamsPerConnection, 1<<31-1)),
			SendPingTimeout:      l.KeepaliveTime,
			PingTimeout:          l.KeepaliveTimeout,
		},
	}
}

// ServeHTTP2 serves hs (from NewHTTPServer) on lis under the connection
// caps (MaxConnections, MaxConnectionsPerPeer), as Serve does for the
// grpc.Server; over TLS when hs has a TLSConfig. The caller still owns
// lis; it returns http.ErrServerClosed after hs.Shutdown or hs.Close.
func (s *Server) ServeHTTP2(hs *http.Server, lis net.Listener) error {
	lis = s.conns.Listener(lis)
	if hs.TLSConfig != nil {
		return hs.ServeTLS(lis, "", "")
	}
	return hs.Serve(lis)
}
