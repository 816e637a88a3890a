package identity_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// countingIssuer records how many certificates reached the signer.
type countingIssuer struct {
	*identity.CA
	n atomic.Int32
}

func (c *countingIssuer) Issue(ctx context.Context, req identity.IssueRequest) (*identity.Issued, error) {
	c.n.Add(1)
	return c.CA.Issue(ctx, req)
}

// authnFunc adapts a function to identity.Authenticator.
type authnFunc func(ctx context.Context, token []byte) (identity.ServiceAccount, error)

func (f authnFunc) Authenticate(ctx context.Context, token []byte) (identity.ServiceAccount, error) {
	return f(ctx, token)
}

// serve starts the service on a loopback gRPC server and returns a client.
func serve(t testing.TB, svc *identity.Service) pb.IdentityClient {
	t.Helper()
	lis := testutil.Listen(t)
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewIdentityClient(conn)
}

var webTokens = identity.Tokens{
	"web-token":   {Namespace: "shop", Name: "web"},
	"admin-token": {Namespace: "shop", Name: "admin"},
	"bank-token":  {Namespace: "bank", Name: "web"},
}

func TestCertifyOverGRPCIssuesADERChainThatVerifies(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, p.ca)
	require.NoError(t, err)
	client := serve(t, svc)

	name := mustName(t, "shop", "web")
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	der := testutil.CSR(t, key, name.String())
	for _, csr := range [][]byte{der, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})} {
		resp, err := client.Certify(ctx, &pb.CertifyRequest{Identity: name.String(), Token: []byte("web-token"), CertificateSigningRequest: csr})
		require.NoError(t, err)

		leaf, err := x509.ParseCertificate(resp.GetLeafCertificate())
		require.NoError(t, err, "the leaf is DER on the wire")
		require.Len(t, resp.GetIntermediateCertificates(), 1)
		inter, err := x509.ParseCertificate(resp.GetIntermediateCertificates()[0])
		require.NoError(t, err)
		assert.True(t, inter.Equal(p.issuer.Cert))
		assert.True(t, leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()))
		assert.Equal(t, leaf.NotAfter, resp.GetValidUntil().AsTime())
		assert.WithinDuration(t, time.Now().Add(identity.DefaultLifetime), leaf.NotAfter, 5*time.Second)
		assert.WithinDuration(t, time.Now().Add(-identity.DefaultClockSkewAllowance), leaf.NotBefore, 5*time.Second)

		got, err := identity.VerifyPeer(p.bundle, [][]byte{leaf.Raw, inter.Raw}, time.Now(), x509.ExtKeyUsageClientAuth)
		require.NoError(t, err)
		assert.Equal(t, name, got)
	}
}

func TestCertifyRejectsCSRForAnotherServiceAccount(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	counting := &countingIssuer{CA: p.ca}
	svc, err := identity.NewService(ctx, webTokens, counting)
	require.NoError(t, err)
	client := serve(t, svc)

	web := mustName(t, "shop", "web")
	admin := mustName(t, "shop", "admin")
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	_, err = client.Certify(ctx, &pb.CertifyRequest{Identity: web.String(), Token: []byte("web-token"), CertificateSigningRequest: testutil.CSR(t, key, admin.String())})
	assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.Zero(t, counting.n.Load())
}

// TestCertifyRefusesBadRequests runs BAD-INPUTS T17, T19 and T20 through
// the gRPC edge: each case gets its status code and nothing is issued.
func TestCertifyRefusesBadRequests(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	counting := &countingIssuer{CA: p.ca}
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	svc, err := identity.NewService(ctx, webTokens, counting, identity.WithMetrics(m))
	require.NoError(t, err)
	client := serve(t, svc)

	web := mustName(t, "shop", "web").String()
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	good := testutil.CSR(t, key, web)
	huge := make([]byte, 1<<20)
	_, _ = rand.Read(huge)
	otherDomain, err := identity.Domain{ControlPlaneNamespace: "linkerd", TrustDomain: "cluster.local"}.Name("shop", "web")
	require.NoError(t, err)

	cases := []struct {
		name     string
		identity string
		token    string
		csr      []byte
		code     codes.Code
	}{
		{"empty token", web, "", good, codes.Unauthenticated},
		{"unknown token", web, "forged", good, codes.Unauthenticated},
		{"token for another service account", web, "admin-token", good, codes.FailedPrecondition},
		{"token for another namespace", web, "bank-token", good, codes.FailedPrecondition},
		{"identity of another installation", otherDomain.String(), "web-token", testutil.CSR(t, key, otherDomain.String()), codes.FailedPrecondition},
		{"malformed identity", "web", "web-token", good, codes.InvalidArgument},
		{"empty identity", "", "web-token", good, codes.InvalidArgument},
		{"empty CSR", web, "web-token", nil, codes.InvalidArgument},
		{"garbage CSR", web, "web-token", []byte("garbage"), codes.InvalidArgument},
		{"1 MiB CSR", web, "web-token", huge, codes.InvalidArgument},
		{"CSR with two SANs", web, "web-token", testutil.CSR(t, key, web, "x.example"), codes.InvalidArgument},
		{"CSR with zero SANs", web, "web-token", testutil.CSR(t, key), codes.InvalidArgument},
		{"CSR with RSA-1024", web, "web-token", csrWithRSAKey(t, web, 1024), codes.InvalidArgument},
		{"CSR with RSA-16384", web, "web-token", csrWithRSAKey(t, web, 16384), codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Certify(ctx, &pb.CertifyRequest{Identity: tc.identity, Token: []byte(tc.token), CertificateSigningRequest: tc.csr})
			require.Error(t, err)
			assert.Nil(t, resp)
			assert.Equal(t, tc.code, status.Code(err), "%v", err)
			assert.Contains(t, status.Convert(err).Message(), "identity: ")
		})
	}
	assert.Zero(t, counting.n.Load(), "nothing may reach the issuer")
	assert.Equal(t, 2.0, counterValue(t, reg, "weft_identity_certify_requests_total", "unauthenticated"), "empty and unknown tokens")
	assert.Equal(t, 3.0, counterValue(t, reg, "weft_identity_certify_requests_total", "identity_mismatch"))

	_, err = client.Certify(ctx, &pb.CertifyRequest{Identity: web, Token: []byte("web-token"), CertificateSigningRequest: good})
	require.NoError(t, err)
	assert.Equal(t, 1.0, counterValue(t, reg, "weft_identity_certify_requests_total", "ok"))
	assert.Equal(t, float64(p.issuer.Cert.NotAfter.Unix()), gaugeValue(t, reg, "weft_identity_issuer_expiry_timestamp_seconds"))
}

func TestCertifyFailsClosedWhenTheAuthenticatorCannotDecide(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	counting := &countingIssuer{CA: p.ca}
	web := mustName(t, "shop", "web").String()
	csr := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web)
	for name, authErr := range map[string]error{
		"unavailable":           identity.ErrUnavailable,
		"an unclassified error": errors.New("boom"),
		"a deadline":            context.DeadlineExceeded,
	} {
		t.Run(name, func(t *testing.T) {
			svc, err := identity.NewService(ctx, authnFunc(func(context.Context, []byte) (identity.ServiceAccount, error) {
				return identity.ServiceAccount{}, authErr
			}), counting)
			require.NoError(t, err)
			_, err = serve(t, svc).Certify(ctx, &pb.CertifyRequest{Identity: web, Token: []byte("t"), CertificateSigningRequest: csr})
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		})
	}
	assert.Zero(t, counting.n.Load())
}

// badIssuer returns a certificate for a name other than the one asked.
type badIssuer struct{ inner *identity.CA }

func (b badIssuer) Issue(ctx context.Context, req identity.IssueRequest) (*identity.Issued, error) {
	req.Name.ServiceAccount = "admin"
	return b.inner.Issue(ctx, req)
}

func TestCertifyRefusesToHandOutAWrongCertificateFromTheIssuer(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	svc, err := identity.NewService(ctx, webTokens, badIssuer{p.ca})
	require.NoError(t, err)
	web := mustName(t, "shop", "web").String()
	_, err = serve(t, svc).Certify(ctx, &pb.CertifyRequest{Identity: web, Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web)})
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

// boastfulIssuer signs correctly but claims a ValidUntil of its choosing,
// and records the deadline of the context it was called with.
type boastfulIssuer struct {
	inner      identity.Issuer
	validUntil func(leafNotAfter time.Time) time.Time
	deadline   atomic.Pointer[time.Time]
}

func (b *boastfulIssuer) Issue(ctx context.Context, req identity.IssueRequest) (*identity.Issued, error) {
	if d, ok := ctx.Deadline(); ok {
		b.deadline.Store(&d)
	}
	is, err := b.inner.Issue(ctx, req)
	if err != nil {
		return nil, err
	}
	is.ValidUntil = b.validUntil(is.Leaf.NotAfter)
	return is, nil
}

func TestCertifyTakesValidUntilFromTheLeafNotFromTheIssuer(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	web := mustName(t, "shop", "web").String()
	for name, claim := range map[string]func(time.Time) time.Time{
		"976 hours past the leaf": func(na time.Time) time.Time { return na.Add(976 * time.Hour) },
		"earlier than the leaf":   func(na time.Time) time.Time { return na.Add(-time.Hour) },
		"not set":                 func(time.Time) time.Time { return time.Time{} },
	} {
		t.Run(name, func(t *testing.T) {
			svc, err := identity.NewService(ctx, webTokens, &boastfulIssuer{inner: p.ca, validUntil: claim})
			require.NoError(t, err)
			resp, err := serve(t, svc).Certify(ctx, &pb.CertifyRequest{Identity: web, Token: []byte("web-token"),
				CertificateSigningRequest: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web)})
			require.NoError(t, err)
			leaf, err := x509.ParseCertificate(resp.GetLeafCertificate())
			require.NoError(t, err)
			assert.Equal(t, leaf.NotAfter, resp.GetValidUntil().AsTime(), "valid_until on the wire is the leaf's NotAfter")

			is, err := svc.Certify(ctx, identity.Request{Identity: web, Token: []byte("web-token"),
				CSR: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web)})
			require.NoError(t, err)
			assert.Equal(t, is.Leaf.NotAfter, is.ValidUntil)
		})
	}
}

func TestTheCallersDeadlineReachesTheIssuer(t *testing.T) {
	p := newPKI(t)
	is := &boastfulIssuer{inner: p.ca, validUntil: func(na time.Time) time.Time { return na }}
	svc, err := identity.NewService(testutil.Context(t, 0), webTokens, is)
	require.NoError(t, err)
	web := mustName(t, "shop", "web").String()
	ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
	defer cancel()
	callerDeadline, _ := ctx.Deadline()
	_, err = serve(t, svc).Certify(ctx, &pb.CertifyRequest{Identity: web, Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), web)})
	require.NoError(t, err)
	got := is.deadline.Load()
	require.NotNil(t, got, "Issue ran without a deadline although the caller set one")
	// gRPC sends the time left (rounded up to its unit) and the server
	// counts it from when the call arrived: the deadline Issue sees is the
	// caller's, give or take that rounding.
	assert.WithinDuration(t, callerDeadline, *got, time.Second, "Issue's deadline is not the caller's")
}

func TestCertifyUsesTheConfiguredLifetimeDomainAndSkew(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	now := time.Now().Truncate(time.Second) // the issuer must be valid at now
	domain := identity.Domain{ControlPlaneNamespace: "linkerd", TrustDomain: "example.org"}
	svc, err := identity.NewService(ctx, webTokens, p.ca,
		identity.WithDomain(domain),
		identity.WithLifetime(time.Hour),
		identity.WithClockSkewAllowance(time.Minute),
		identity.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	name, err := domain.Name("shop", "web")
	require.NoError(t, err)
	is, err := svc.Certify(ctx, identity.Request{Identity: name.String(), Token: []byte("web-token"),
		CSR: testutil.CSR(t, testutil.GenerateKey(t, testutil.Ed25519), name.String())})
	require.NoError(t, err)
	assert.Equal(t, now.Add(-time.Minute).UTC(), is.Leaf.NotBefore)
	assert.Equal(t, now.Add(time.Hour).UTC(), is.Leaf.NotAfter)
	assert.Equal(t, []string{"web.shop.serviceaccount.identity.linkerd.example.org"}, is.Leaf.DNSNames)
}

func TestNewServiceRefusesBadSettings(t *testing.T) {
	ctx := testutil.Context(t, 0)
	p := newPKI(t)
	for name, opts := range map[string][]identity.Option{
		"lifetime under a minute": {identity.WithLifetime(time.Second)},
		"negative skew":           {identity.WithClockSkewAllowance(-time.Second)},
		"skew beyond lifetime":    {identity.WithLifetime(time.Hour), identity.WithClockSkewAllowance(2 * time.Hour)},
		"bad domain":              {identity.WithDomain(identity.Domain{TrustDomain: "Bad_Domain"})},
	} {
		_, err := identity.NewService(ctx, webTokens, p.ca, opts...)
		assert.Error(t, err, name)
	}
	_, err := identity.NewService(ctx, nil, p.ca)
	assert.Error(t, err)
	_, err = identity.NewService(ctx, webTokens, nil)
	assert.Error(t, err)
}

// counterValue reads one labelled series of a counter; 0 when absent.
func counterValue(t testing.TB, reg *prometheus.Registry, name, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func gaugeValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}
