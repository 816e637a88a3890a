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
// caller owns the server, its listener and its limits.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	pb.RegisterIdentityServer(r, grpcServer{s: s})
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
