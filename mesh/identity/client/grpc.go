package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/mesh/identity"
)

// GRPCCertifier is a Certifier that calls io.linkerd.proxy.identity.Identity
// over a gRPC connection the caller owns.
type GRPCCertifier struct {
	client pb.IdentityClient
}

// NewGRPCCertifier returns a Certifier over conn.
func NewGRPCCertifier(conn grpc.ClientConnInterface) *GRPCCertifier {
	return &GRPCCertifier{client: pb.NewIdentityClient(conn)}
}

// Certify sends the request (CSR as DER) and parses the answer (DER, or
// PEM from a service that sends it).
func (g *GRPCCertifier) Certify(ctx context.Context, req identity.Request) (*identity.Issued, error) {
	csr := req.CSR
	if b, _ := pem.Decode(csr); b != nil {
		csr = b.Bytes
	}
	resp, err := g.client.Certify(ctx, &pb.CertifyRequest{
		Identity:                  req.Identity,
		Token:                     req.Token,
		CertificateSigningRequest: csr,
	})
	if err != nil {
		return nil, fmt.Errorf("client: Certify: %w", err)
	}
	leaf, err := parseCert(resp.GetLeafCertificate())
	if err != nil {
		return nil, fmt.Errorf("client: Certify response: leaf: %w", err)
	}
	is := &identity.Issued{Leaf: leaf, ValidUntil: resp.GetValidUntil().AsTime()}
	if len(resp.GetIntermediateCertificates()) > identity.MaxPeerChain {
		return nil, fmt.Errorf("client: Certify response: %d intermediates exceed %d", len(resp.GetIntermediateCertificates()), identity.MaxPeerChain)
	}
	for i, raw := range resp.GetIntermediateCertificates() {
		c, err := parseCert(raw)
		if err != nil {
			return nil, fmt.Errorf("client: Certify response: intermediate %d: %w", i, err)
		}
		is.Intermediates = append(is.Intermediates, c)
	}
	if resp.GetValidUntil() == nil {
		is.ValidUntil = leaf.NotAfter
	}
	return is, nil
}

func parseCert(b []byte) (*x509.Certificate, error) {
	if len(b) == 0 {
		return nil, errors.New("empty")
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN")) {
		blk, _ := pem.Decode(bytes.TrimSpace(b))
		if blk == nil || blk.Type != "CERTIFICATE" {
			return nil, errors.New("malformed PEM certificate")
		}
		b = blk.Bytes
	}
	return x509.ParseCertificate(b)
}
