package identity

import (
	"context"
	"errors"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Register exposes s as io.linkerd.proxy.identity.Identity on r. The
// caller owns the server, its listener and its limits (mesh/grpclimit);
// the request timeout (WithRequestTimeout) is the service's own and holds
// on any server.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	// The generated descriptor's handler reads the request before anything
	// of ours runs, under no deadline but the client's. This one puts the
	// request timeout on the read too. The wire contract is unchanged.
	desc := pb.Identity_ServiceDesc
	desc.Methods = []grpc.MethodDesc{{MethodName: "Certify", Handler: certifyHandler}}
	r.RegisterService(&desc, grpcServer{s: s})
}

// certifyHandler is the unary handler of Certify, with the request timeout
// running from the moment gRPC hands over the stream.
func certifyHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	g := srv.(grpcServer)
	timeout := g.s.cfg.timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in := new(pb.CertifyRequest)
	// gRPC's read waits on the stream's own context, which our deadline
	// cannot shorten; so wait for it here. When the handler returns, gRPC
	// ends the stream and the read returns.
	read := make(chan error, 1)
	go func() { read <- dec(in) }()
	select {
	case err := <-read:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		g.s.cfg.metrics.Requests.With("result", "deadline_exceeded").Add(1)
		return nil, status.Errorf(codes.DeadlineExceeded, "identity: the Certify request did not arrive within %s", timeout)
	}
	if interceptor == nil {
		return g.Certify(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.Identity_Certify_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return g.Certify(ctx, req.(*pb.CertifyRequest))
	})
}

// grpcServer is the transport edge: it converts messages and maps errors
// to status codes, and does nothing else.
type grpcServer struct {
	pb.UnimplementedIdentityServer
	s *Service
}

func (g grpcServer) Certify(ctx context.Context, req *pb.CertifyRequest) (*pb.CertifyResponse, error) {
	issued, err := g.s.Certify(ctx, Request{
		Identity: req.GetIdentity(),
		Token:    req.GetToken(),
		CSR:      req.GetCertificateSigningRequest(),
	})
	if err != nil {
		return nil, status.Error(Code(err), err.Error())
	}
	return IssuedToProto(issued), nil
}

// IssuedToProto converts an issued chain to the wire form: DER
// certificates, as Linkerd's proxy expects them.
func IssuedToProto(is *Issued) *pb.CertifyResponse {
	resp := &pb.CertifyResponse{
		LeafCertificate: is.Leaf.Raw,
		ValidUntil:      timestamppb.New(is.ValidUntil),
	}
	for _, c := range is.Intermediates {
		resp.IntermediateCertificates = append(resp.IntermediateCertificates, c.Raw)
	}
	return resp
}

// Code maps an error of this package to the gRPC status code the Certify
// endpoint answers with.
func Code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, ErrUnauthenticated):
		return codes.Unauthenticated
	case errors.Is(err, ErrIdentityMismatch):
		return codes.FailedPrecondition
	case errors.Is(err, ErrInvalidCSR), errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidRequest):
		return codes.InvalidArgument
	case errors.Is(err, ErrRateLimited):
		return codes.ResourceExhausted
	case errors.Is(err, ErrUnavailable):
		return codes.Unavailable
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	default:
		return codes.Internal
	}
}
