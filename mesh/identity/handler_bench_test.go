//go:build unix

package identity_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// generatedEdge serves Certify through the generated handler, which reads
// the request before any code of ours runs: the registration Register
// replaced. It is the baseline of BenchmarkCertifyHandler.
type generatedEdge struct {
	pb.UnimplementedIdentityServer
	svc *identity.Service
}

func (g generatedEdge) Certify(ctx context.Context, req *pb.CertifyRequest) (*pb.CertifyResponse, error) {
	is, err := g.svc.Certify(ctx, identity.Request{Identity: req.GetIdentity(), Token: req.GetToken(), CSR: req.GetCertificateSigningRequest()})
	if err != nil {
		return nil, err
	}
	return identity.IssuedToProto(is), nil
}

// BenchmarkCertifyHandler compares, in one run, Certify over gRPC on
// loopback through Register's handler (deadline from the start of the
// call, request read under it) and through the generated one, one caller
// at a time: the cost of the deadline on the read.
//
//	go test -run '^$' -bench CertifyHandler -benchtime 3s -count 3 ./mesh/identity/
func BenchmarkCertifyHandler(b *testing.B) {
	p := newPKI(b)
	name := mustName(b, "shop", "web")
	csr := testutil.CSR(b, testutil.GenerateKey(b, testutil.ECDSAP256), name.String())
	svc, err := identity.NewService(context.Background(), identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, p.ca,
		identity.WithRateLimit(identity.RateLimit{}))
	require.NoError(b, err)
	msg := &pb.CertifyRequest{Identity: name.String(), Token: []byte("web-token"), CertificateSigningRequest: csr}
	for _, edge := range []string{"register", "generated"} {
		b.Run(edge, func(b *testing.B) {
			lis := testutil.Listen(b)
			srv := grpc.NewServer()
			if edge == "register" {
				svc.Register(srv)
			} else {
				pb.RegisterIdentityServer(srv, generatedEdge{svc: svc})
			}
			go func() { _ = srv.Serve(lis) }()
			defer srv.Stop()
			conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(b, err)
			defer conn.Close()
			client := pb.NewIdentityClient(conn)
			ctx := context.Background()
			_, err = client.Certify(ctx, msg)
			require.NoError(b, err)
			serial(b, func() error { _, err := client.Certify(ctx, msg); return err })
		})
	}
}
