package testutil_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

func TestLeafChainsThroughIssuerToAnchor(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{})
	issuer := anchor.Issuer(t, testutil.CertOptions{KeyType: testutil.ECDSAP384})
	leaf := issuer.Leaf(t, testutil.CertOptions{Name: "web.shop.serviceaccount.identity.weft.cluster.local", Lifetime: time.Hour})

	inter := x509.NewCertPool()
	inter.AddCert(issuer.Cert)
	_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: testutil.Pool(anchor), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err)
	assert.Equal(t, []string{"web.shop.serviceaccount.identity.weft.cluster.local"}, leaf.Cert.DNSNames)
	assert.Len(t, leaf.TLS.Certificate, 2, "leaf plus issuer")
	assert.False(t, leaf.Cert.IsCA)
	assert.WithinDuration(t, leaf.Cert.NotBefore.Add(time.Hour), leaf.Cert.NotAfter, time.Second)
}

func TestLeafFromAnotherAnchorDoesNotVerify(t *testing.T) {
	a := testutil.NewAnchor(t, testutil.CertOptions{})
	b := testutil.NewAnchor(t, testutil.CertOptions{})
	leaf := b.Leaf(t, testutil.CertOptions{})
	_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: testutil.Pool(a), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	assert.Error(t, err)
}

func TestCSRCarriesRequestedNames(t *testing.T) {
	key := testutil.GenerateKey(t, testutil.Ed25519)
	csr, err := x509.ParseCertificateRequest(testutil.CSR(t, key, "a.b", "c.d"))
	require.NoError(t, err)
	require.NoError(t, csr.CheckSignature())
	assert.Equal(t, []string{"a.b", "c.d"}, csr.DNSNames)
}
