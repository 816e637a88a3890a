package pki_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/internal/zlinttest"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

func TestAnchorAndIssuerFormAWorkingHierarchy(t *testing.T) {
	anchor, err := pki.NewAnchor(pki.Options{})
	require.NoError(t, err)
	issuer, err := pki.NewIssuer(anchor, pki.Options{Lifetime: 30 * 24 * time.Hour})
	require.NoError(t, err)

	assert.Equal(t, pki.DefaultAnchorName, anchor.Cert.Subject.CommonName)
	assert.Equal(t, pki.DefaultIssuerName, issuer.Cert.Subject.CommonName)
	assert.True(t, anchor.Cert.IsCA)
	assert.True(t, issuer.Cert.IsCA)
	assert.True(t, issuer.Cert.MaxPathLenZero)
	assert.WithinDuration(t, time.Now().Add(pki.DefaultLifetime), anchor.Cert.NotAfter, time.Minute)
	assert.WithinDuration(t, time.Now().Add(30*24*time.Hour), issuer.Cert.NotAfter, time.Minute)
	assert.Contains(t, string(issuer.KeyPEM), "EC PRIVATE KEY")

	bundle, err := identity.NewBundle(anchor.Cert)
	require.NoError(t, err)
	_, err = identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	require.NoError(t, err, "the issuer is usable by the identity service")

	back, err := pki.ParseKeyPair(issuer.CertPEM, issuer.KeyPEM)
	require.NoError(t, err)
	assert.True(t, back.Cert.Equal(issuer.Cert))
	_, err = pki.ParseKeyPair(issuer.CertPEM, anchor.KeyPEM)
	assert.ErrorContains(t, err, "does not belong")

	zlinttest.Check(t, anchor.Cert)
	zlinttest.Check(t, issuer.Cert)
}

func TestNewIssuerIsCappedAtTheAnchorExpiry(t *testing.T) {
	anchor, err := pki.NewAnchor(pki.Options{Lifetime: 48 * time.Hour})
	require.NoError(t, err)
	issuer, err := pki.NewIssuer(anchor, pki.Options{})
	require.NoError(t, err)
	assert.Equal(t, anchor.Cert.NotAfter, issuer.Cert.NotAfter)
}

func TestOptionsAreValidated(t *testing.T) {
	_, err := pki.NewAnchor(pki.Options{Lifetime: time.Minute})
	assert.ErrorContains(t, err, "shorter than one hour")
	_, err = pki.NewAnchor(pki.Options{CommonName: strings.Repeat("a", 65)})
	assert.ErrorContains(t, err, "longer than 64")
	_, err = pki.NewIssuer(nil, pki.Options{})
	assert.Error(t, err)
}

func TestInspectChecksChainsAndWarnsBeforeExpiry(t *testing.T) {
	now := time.Now()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root", Lifetime: 365 * 24 * time.Hour})
	soon := anchor.Issuer(t, testutil.CertOptions{Name: "soon", Lifetime: 10 * 24 * time.Hour})
	leaf := soon.Leaf(t, testutil.CertOptions{Name: "web.shop.serviceaccount.identity.weft.cluster.local"})
	stranger := testutil.NewAnchor(t, testutil.CertOptions{Name: "stranger"}).Issuer(t, testutil.CertOptions{Name: "stranger-issuer"})

	reports := pki.Inspect([]pki.Entry{
		{Source: "ca.crt", Cert: anchor.Cert},
		{Source: "issuer.crt", Cert: soon.Cert},
		{Source: "leaf.crt", Cert: leaf.Cert},
		{Source: "other.crt", Cert: stranger.Cert},
	}, nil, now)
	require.Len(t, reports, 4)
	assert.True(t, reports[0].SelfSigned)
	assert.NoError(t, reports[0].Chain)
	assert.NoError(t, reports[1].Chain)
	require.NotEmpty(t, reports[1].Warnings)
	assert.Contains(t, reports[1].Warnings[0], "less than 30 days")
	assert.NoError(t, reports[2].Chain)
	assert.Equal(t, []string{"web.shop.serviceaccount.identity.weft.cluster.local"}, reports[2].DNSNames)
	assert.Error(t, reports[3].Chain)
	assert.False(t, reports[3].OK())

	// With explicit anchors that do not include the root, nothing chains.
	reports = pki.Inspect([]pki.Entry{{Source: "leaf", Cert: leaf.Cert}}, []*x509.Certificate{stranger.Cert}, now)
	assert.Error(t, reports[0].Chain)

	// Past expiry, the report is not OK.
	reports = pki.Inspect([]pki.Entry{{Source: "issuer", Cert: soon.Cert}}, []*x509.Certificate{anchor.Cert}, now.Add(11*24*time.Hour))
	assert.False(t, reports[0].OK())
	assert.Contains(t, reports[0].Warnings[0], "EXPIRED")
}

func TestFindCertificatesSkipsOtherBlocksButNotBrokenCertificates(t *testing.T) {
	anchor, err := pki.NewAnchor(pki.Options{})
	require.NoError(t, err)
	combined := append(append([]byte("key and certificate in one file\n"), anchor.KeyPEM...), anchor.CertPEM...)
	certs, err := pki.FindCertificates(combined)
	require.NoError(t, err)
	require.Len(t, certs, 1)
	assert.True(t, certs[0].Equal(anchor.Cert))

	_, err = pki.FindCertificates(anchor.KeyPEM)
	assert.ErrorContains(t, err, "no PEM certificate found")
	_, err = pki.FindCertificates(append(append([]byte(nil), anchor.KeyPEM...), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")...))
	assert.ErrorContains(t, err, "PEM block 2")
}
