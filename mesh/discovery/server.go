package discovery

import (
	"context"
	"errors"
	"log/slog"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Server serves the proxy API's io.linkerd.proxy.destination.Destination
// service from a Source. It owns no listener: mount it on a grpc.Server
// with Register.
type Server struct {
	src Source
	cfg config
}

// NewServer returns a Destination server reading src. Options: WithLogger,
// WithMetrics.
func NewServer(src Source, opts ...Option) (*Server, error) {
	if src == nil {
		return nil, errors.New("discovery: NewServer needs a source")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Server{src: src, cfg: cfg}, nil
}

// Register mounts the Destination service on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	pb.RegisterDestinationServer(r, grpcServer{s: s})
}

type grpcServer struct {
	pb.UnimplementedDestinationServer
	s *Server
}

func (g grpcServer) Get(req *pb.GetDestination, stream pb.Destination_GetServer) error {
	return g.s.get(req, stream)
}

func (g grpcServer) GetProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	return g.s.getProfile(req, stream)
}

func (s *Server) logger(ctx context.Context, method string, req *pb.GetDestination) (*slog.Logger, ContextToken) {
	log := s.cfg.logger.With("method", method, "path", truncate(req.GetPath(), 300))
	if p, ok := peer.FromContext(ctx); ok {
		log = log.With("remote", p.Addr.String())
	}
	tok, err := ParseContextToken(req.GetContextToken())
	if err != nil {
		// A bad token only costs the client its client-side profiles.
		log.Warn("discovery: ignoring bad context token", "error", err)
	}
	return log, tok
}

// statusFor maps a subscription error to the gRPC status the proxy sees.
func statusFor(err error) error {
	switch {
	case errors.Is(err, ErrInvalidTarget):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

var errSourceClosed = status.Error(codes.Unavailable, "discovery: source shut down; reconnect")

func (s *Server) get(req *pb.GetDestination, stream pb.Destination_GetServer) error {
	ctx := stream.Context()
	log, _ := s.logger(ctx, "Get", req)
	sub, err := s.src.SubscribeEndpoints(req.GetPath())
	if err != nil {
		log.Debug("discovery: refusing subscription", "error", err)
		return statusFor(err)
	}
	if sub == nil {
		return errSourceClosed
	}
	defer sub.Close()
	subs := s.cfg.metrics.Subscriptions.With("kind", "endpoints")
	subs.Add(1)
	defer subs.Add(-1)
	sent := s.cfg.metrics.Messages.With("method", "Get")
	log.Debug("discovery: subscribed")

	encode := protoCodec(ctx)
	var last *EndpointSnapshot
	for {
		cur := sub.Latest()
		if b := cur.updatesSince(last); b != nil {
			for _, m := range b.sendable(stream, encode) {
				if err := stream.SendMsg(m); err != nil {
					log.Debug("discovery: send failed", "error", err)
					return err
				}
				sent.Add(1)
			}
		}
		last = cur
		select {
		case <-sub.Updated():
		case <-sub.Done():
			return errSourceClosed
		case <-ctx.Done():
			log.Debug("discovery: subscription ended")
			return nil
		}
	}
}

func (s *Server) getProfile(req *pb.GetDestination, stream pb.Destination_GetProfileServer) error {
	ctx := stream.Context()
	log, tok := s.logger(ctx, "GetProfile", req)
	sub, err := s.src.SubscribeProfile(req.GetPath(), tok)
	if err != nil {
		log.Debug("discovery: refusing subscription", "error", err)
		return statusFor(err)
	}
	if sub == nil {
		return errSourceClosed
	}
	defer sub.Close()
	subs := s.cfg.metrics.Subscriptions.With("kind", "profile")
	subs.Add(1)
	defer subs.Add(-1)
	sent := s.cfg.metrics.Messages.With("method", "GetProfile")

	encode := protoCodec(ctx)
	var last *ProfileSnapshot
	for {
		if cur := sub.Latest(); cur != last {
			if err := stream.SendMsg(cur.sendable(stream, encode)); err != nil {
				log.Debug("discovery: send failed", "error", err)
				return err
			}
			sent.Add(1)
			last = cur
		}
		select {
		case <-sub.Updated():
		case <-sub.Done():
			return errSourceClosed
		case <-ctx.Done():
			return nil
		}
	}
}

// protoCodec reports whether a stream uses the default protobuf codec, so
// that messages encoded once for another such stream can be sent on it.
func protoCodec(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	ct := md.Get("content-type")
	return len(ct) == 1 && (ct[0] == "application/grpc" || ct[0] == "application/grpc+proto")
}
