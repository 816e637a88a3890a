package smallstep_test

import (
	"crypto/x509"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.step.sm/crypto/jose"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/weftmesh/weft/apis/proxy/identity"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/internal/zlinttest"
	"github.com/weftmesh/weft/mesh/identity/smallstep"
	"github.com/weftmesh/weft/mesh/identity/smallstep/smallsteptest"
)

func startAuthority(t *testing.T) *smallsteptest.Authority {
	t.Helper()
	a, err := smallsteptest.Start(testutil.Context(t, 30*time.Second), smallsteptest.Options{})
	require.NoError(t, err, "a real step-ca must start in-process on loopback")
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func newIssuer(t *testing.T, a *smallsteptest.Authority) *smallstep.Issuer {
	t.Helper()
	is, err := smallstep.New(testutil.Context(t, 0), smallstep.Config{URL: a.URL, Roots: a.Roots, Provisioner: a.Provisioner, Key: a.Key})
	require.NoError(t, err)
	return is
}

// TestServiceIssuesThroughARealStepCA runs Certify end to end over gRPC
// with step-ca as the signer.
func TestServiceIssuesThroughARealStepCA(t *testing.T) {
	ctx := testutil.Context(t, 0)
	a := startAuthority(t)
	is := newIssuer(t, a)
	bundle, err := identity.NewBundle(a.Root)
	require.NoError(t, err)
	svc, err := identity.NewService(ctx, identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, is)
	require.NoError(t, err)

	lis := testutil.Listen(t)
	srv := grpc.NewServer()
	svc.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	name, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)
	resp, err := pb.NewIdentityClient(conn).Certify(ctx, &pb.CertifyRequest{
		Identity: name.String(), Token: []byte("web-token"),
		CertificateSigningRequest: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String()),
	})
	require.NoError(t, err)

	leaf, err := x509.ParseCertificate(resp.GetLeafCertificate())
	require.NoError(t, err)
	require.NotEmpty(t, resp.GetIntermediateCertificates())
	inter, err := x509.ParseCertificate(resp.GetIntermediateCertificates()[0])
	require.NoError(t, err)
	assert.True(t, inter.Equal(a.Intermediate), "signed by step-ca's intermediate")

	got, err := identity.VerifyPeer(bundle, [][]byte{leaf.Raw, inter.Raw}, time.Now(), x509.ExtKeyUsageClientAuth)
	require.NoError(t, err)
	assert.Equal(t, name, got)
	assert.Equal(t, []string{name.String()}, leaf.DNSNames)
	assert.False(t, leaf.IsCA)
	assert.NotZero(t, leaf.KeyUsage&x509.KeyUsageDigitalSignature)
	assert.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage)
	assert.WithinDuration(t, time.Now().Add(24*time.Hour), leaf.NotAfter, 10*time.Second, "the mesh's lifetime, not step-ca's default")
	assert.WithinDuration(t, time.Now().Add(-20*time.Second), leaf.NotBefore, 10*time.Second, "backdated by the skew allowance")
	zlinttest.Check(t, leaf)
}

func TestStepCARefusesATokenFromAnUnknownProvisionerKey(t *testing.T) {
	ctx := testutil.Context(t, 0)
	a := startAuthority(t)
	forged, err := jose.GenerateJWK("EC", "P-256", "ES256", "sig", "", 0)
	require.NoError(t, err)
	forged.KeyID = a.Key.KeyID // same kid, wrong key
	is, err := smallstep.New(ctx, smallstep.Config{URL: a.URL, Roots: a.Roots, Provisioner: a.Provisioner, Key: forged})
	require.NoError(t, err)
	svc, err := identity.NewService(ctx, identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, is)
	require.NoError(t, err)
	name, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)
	_, err = svc.Certify(ctx, identity.Request{Identity: name.String(), Token: []byte("web-token"),
		CSR: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String())})
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrUnavailable)
	assert.Equal(t, codes.Unavailable, identity.Code(err))
}

func TestStepCARefusesALifetimeBeyondTheProvisionerMaximum(t *testing.T) {
	ctx := testutil.Context(t, 0)
	a := startAuthority(t)
	is := newIssuer(t, a)
	name, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)
	csr, err := identity.ParseCSR(testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String()))
	require.NoError(t, err)
	now := time.Now()
	_, err = is.Issue(ctx, identity.IssueRequest{CSR: csr, Name: name, NotBefore: now, NotAfter: now.Add(72 * time.Hour)})
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrUnavailable)
}

func TestNewRefusesBadConfigAndUnreachableAuthorities(t *testing.T) {
	ctx := testutil.Context(t, 0)
	key, err := jose.GenerateJWK("EC", "P-256", "ES256", "sig", "", 0)
	require.NoError(t, err)
	pub := key.Public()
	roots := x509.NewCertPool()
	for label, cfg := range map[string]smallstep.Config{
		"no URL":      {Roots: roots, Provisioner: "p", Key: key},
		"http URL":    {URL: "http://127.0.0.1:1", Roots: roots, Provisioner: "p", Key: key},
		"no roots":    {URL: "https://127.0.0.1:1", Provisioner: "p", Key: key},
		"no name":     {URL: "https://127.0.0.1:1", Roots: roots, Key: key},
		"public key":  {URL: "https://127.0.0.1:1", Roots: roots, Provisioner: "p", Key: &pub},
		"unreachable": {URL: "https://127.0.0.1:" + itoa(testutil.FreePort(t)), Roots: roots, Provisioner: "p", Key: key},
	} {
		_, err := smallstep.New(ctx, cfg, smallstep.WithTimeout(2*time.Second))
		assert.Error(t, err, label)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestIssuesThroughAnX5CProvisioner(t *testing.T) {
	ctx := testutil.Context(t, 0)
	a := startAuthority(t)
	is, err := smallstep.New(ctx, smallstep.Config{URL: a.URL, Roots: a.Roots, Provisioner: a.X5CProvisioner,
		X5C: &smallstep.X5CCredentials{Chain: a.X5CChain, Key: a.X5CKey}})
	require.NoError(t, err)
	name, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)
	svc, err := identity.NewService(ctx, identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, is)
	require.NoError(t, err)
	out, err := svc.Certify(ctx, identity.Request{Identity: name.String(), Token: []byte("web-token"),
		CSR: testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String())})
	require.NoError(t, err)
	assert.Equal(t, []string{name.String()}, out.Leaf.DNSNames)
	require.NotEmpty(t, out.Intermediates)
	assert.True(t, out.Intermediates[0].Equal(a.Intermediate))

	// X5C credentials from an untrusted root are refused by step-ca.
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "stranger"}).Leaf(t, testutil.CertOptions{Name: "x"})
	bad, err := smallstep.New(ctx, smallstep.Config{URL: a.URL, Roots: a.Roots, Provisioner: a.X5CProvisioner,
		X5C: &smallstep.X5CCredentials{Chain: []*x509.Certificate{stranger.Cert}, Key: stranger.Key}})
	require.NoError(t, err)
	csr, err := identity.ParseCSR(testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String()))
	require.NoError(t, err)
	now := time.Now()
	_, err = bad.Issue(ctx, identity.IssueRequest{CSR: csr, Name: name, NotBefore: now, NotAfter: now.Add(time.Hour)})
	assert.ErrorIs(t, err, identity.ErrUnavailable)
}

// The one-time token's validity follows WithClock and WithTokenLifetime,
// and step-ca holds the mesh to it: a token that expired before it was
// sent is refused.
func TestStepCARefusesAOneTimeTokenThatHasExpired(t *testing.T) {
	ctx := testutil.Context(t, 0)
	a := startAuthority(t)
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	is, err := smallstep.New(ctx, smallstep.Config{URL: a.URL, Roots: a.Roots, Provisioner: a.Provisioner, Key: a.Key},
		smallstep.WithClock(func() time.Time { return past }), smallstep.WithTokenLifetime(time.Minute))
	require.NoError(t, err)
	name, err := identity.DefaultDomain().Name("shop", "web")
	require.NoError(t, err)

	tok, err := is.Token(name)
	require.NoError(t, err)
	parsed, err := jose.ParseSigned(tok)
	require.NoError(t, err)
	var claims jose.Claims
	require.NoError(t, parsed.UnsafeClaimsWithoutVerification(&claims))
	assert.Equal(t, past, claims.NotBefore.Time())
	assert.Equal(t, past.Add(time.Minute), claims.Expiry.Time())

	csr, err := identity.ParseCSR(testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String()))
	require.NoError(t, err)
	now := time.Now()
	_, err = is.Issue(ctx, identity.IssueRequest{CSR: csr, Name: name, NotBefore: now, NotAfter: now.Add(time.Hour)})
	require.Error(t, err)
	assert.ErrorIs(t, err, identity.ErrUnavailable)
}
