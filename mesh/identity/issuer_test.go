package identity_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/internal/zlinttest"
)

func issue(t testing.TB, ca identity.Issuer, name identity.Name, kt testutil.KeyType, lifetime time.Duration) *identity.Issued {
	t.Helper()
	csr, err := identity.ParseCSR(testutil.CSR(t, testutil.GenerateKey(t, kt), name.String()))
	require.NoError(t, err)
	now := time.Now()
	is, err := ca.Issue(context.Background(), identity.IssueRequest{
		CSR: csr, Name: name, NotBefore: now.Add(-20 * time.Second), NotAfter: now.Add(lifetime),
	})
	require.NoError(t, err)
	return is
}

// TestIssuedLeafHasTheWorkloadProfile checks BAD-INPUTS T18 on the
// in-memory CA.
func TestIssuedLeafHasTheWorkloadProfile(t *testing.T) {
	p := newPKI(t)
	name := mustName(t, "shop", "web")
	is := issue(t, p.ca, name, testutil.ECDSAP256, 24*time.Hour)
	leaf := is.Leaf

	assert.False(t, leaf.IsCA)
	assert.True(t, leaf.BasicConstraintsValid)
	assert.Equal(t, x509.KeyUsageDigitalSignature, leaf.KeyUsage)
	assert.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage)
	assert.Equal(t, []string{name.String()}, leaf.DNSNames)
	assert.Empty(t, leaf.URIs)
	assert.Empty(t, leaf.IPAddresses)
	assert.Empty(t, leaf.EmailAddresses)
	assert.Equal(t, name.String(), leaf.Subject.CommonName)
	assert.NotEmpty(t, leaf.SubjectKeyId)
	assert.Equal(t, p.issuer.Cert.SubjectKeyId, leaf.AuthorityKeyId)
	assert.Equal(t, 24*time.Hour+20*time.Second, leaf.NotAfter.Sub(leaf.NotBefore).Round(time.Second))
	assert.Equal(t, leaf.NotAfter, is.ValidUntil)
	require.Len(t, is.Intermediates, 1)
	assert.True(t, is.Intermediates[0].Equal(p.issuer.Cert))

	_, err := p.bundle.Verify(leaf, is.Intermediates, time.Now(), x509.ExtKeyUsageServerAuth)
	assert.NoError(t, err)
	_, err = p.bundle.Verify(leaf, is.Intermediates, time.Now(), x509.ExtKeyUsageClientAuth)
	assert.NoError(t, err)
}

func TestLongNamesGetAnEmptySubjectAndACriticalSAN(t *testing.T) {
	p := newPKI(t)
	name := mustName(t, "a-rather-long-namespace-name", "a-rather-long-service-account")
	require.Greater(t, len(name.String()), 64)
	leaf := issue(t, p.ca, name, testutil.ECDSAP256, time.Hour).Leaf
	assert.Empty(t, leaf.Subject.CommonName)
	var critical bool
	for _, e := range leaf.Extensions {
		if e.Id.String() == "2.5.29.17" {
			critical = e.Critical
		}
	}
	assert.True(t, critical, "the SAN extension must be critical when the subject is empty")
	zlinttest.Check(t, leaf)
}

func TestIssueCapsLifetimeAtTheIssuerExpiry(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "issuer", Lifetime: 2 * time.Hour})
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, nil)
	require.NoError(t, err)
	leaf := issue(t, ca, mustName(t, "shop", "web"), testutil.ECDSAP256, 24*time.Hour).Leaf
	assert.False(t, leaf.NotAfter.After(issuer.Cert.NotAfter))
}

// TestEveryIssuedCertificatePassesZlint lints a leaf for each accepted key
// type with zlint's RFC 5280 lints.
func TestEveryIssuedCertificatePassesZlint(t *testing.T) {
	p := newPKI(t)
	for _, kt := range []testutil.KeyType{testutil.ECDSAP256, testutil.ECDSAP384, testutil.Ed25519} {
		is := issue(t, p.ca, mustName(t, "shop", "web"), kt, 24*time.Hour)
		zlinttest.Check(t, is.Leaf)
	}
}

func TestNewCARefusesUnfitIssuers(t *testing.T) {
	p := newPKI(t)
	otherAnchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "other-root"})
	leaf := p.issuer.Leaf(t, testutil.CertOptions{Name: "not-a-ca"})
	expired := p.anchor.Issuer(t, testutil.CertOptions{Name: "expired", NotBefore: time.Now().Add(-48 * time.Hour), Lifetime: time.Hour})
	future := p.anchor.Issuer(t, testutil.CertOptions{Name: "future", NotBefore: time.Now().Add(time.Hour), Lifetime: time.Hour})
	stranger := otherAnchor.Issuer(t, testutil.CertOptions{Name: "stranger"})

	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"leaf as issuer", func() error { _, err := identity.NewCA(leaf.Cert, leaf.Key, nil, p.bundle); return err }, "is not a CA"},
		{"expired issuer", func() error { _, err := identity.NewCA(expired.Cert, expired.Key, nil, p.bundle); return err }, "expired"},
		{"not yet valid", func() error { _, err := identity.NewCA(future.Cert, future.Key, nil, p.bundle); return err }, "not valid before"},
		{"wrong key", func() error { _, err := identity.NewCA(p.issuer.Cert, stranger.Key, nil, p.bundle); return err }, "does not match"},
		{"other trust anchor", func() error { _, err := identity.NewCA(stranger.Cert, stranger.Key, nil, p.bundle); return err }, "does not chain"},
		{"missing key", func() error { _, err := identity.NewCA(p.issuer.Cert, nil, nil, p.bundle); return err }, "required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "identity: ")
		})
	}
}
