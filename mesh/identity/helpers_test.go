package identity_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// testPKI is a trust anchor, an issuer under it, and the bundle holding the
// anchor.
type testPKI struct {
	anchor *testutil.CA
	issuer *testutil.CA
	bundle *identity.Bundle
	ca     *identity.CA
}

func newPKI(t testing.TB) testPKI {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.cluster.local", Lifetime: 365 * 24 * time.Hour})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.weft.cluster.local", Lifetime: 30 * 24 * time.Hour})
	bundle, err := identity.ParseBundle(testutil.BundlePEM(anchor))
	require.NoError(t, err)
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, issuer.Chain[1:], bundle)
	require.NoError(t, err)
	return testPKI{anchor: anchor, issuer: issuer, bundle: bundle, ca: ca}
}

func mustName(t testing.TB, ns, sa string) identity.Name {
	t.Helper()
	n, err := identity.DefaultDomain().Name(ns, sa)
	require.NoError(t, err)
	return n
}

// csrDER builds a CSR from tmpl signed by key.
func csrDER(t testing.TB, tmpl *x509.CertificateRequest, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	require.NoError(t, err)
	return der
}

// csrWithRSAKey returns a syntactically valid CSR for name whose public key
// is an RSA key of the given size. The signature cannot verify (nobody holds
// the key): the point is that the key is refused before any signature
// work, which also keeps huge keys cheap to reject.
func csrWithRSAKey(t testing.TB, name string, bits int) []byte {
	t.Helper()
	base := csrDER(t, &x509.CertificateRequest{DNSNames: []string{name}}, testutil.GenerateKey(t, testutil.ECDSAP256))
	var outer struct {
		TBS       asn1.RawValue
		Algorithm pkix.AlgorithmIdentifier
		Signature asn1.BitString
	}
	_, err := asn1.Unmarshal(base, &outer)
	require.NoError(t, err)
	var tbs struct {
		Version    int
		Subject    asn1.RawValue
		PublicKey  asn1.RawValue
		Attributes asn1.RawValue
	}
	_, err = asn1.Unmarshal(outer.TBS.FullBytes, &tbs)
	require.NoError(t, err)

	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	n.Add(n, big.NewInt(12345)) // odd, top bit set: a plausible modulus
	rsaSPKI, err := x509.MarshalPKIXPublicKey(&rsa.PublicKey{N: n, E: 65537})
	require.NoError(t, err)
	tbs.PublicKey = asn1.RawValue{FullBytes: rsaSPKI}
	tbsDER, err := asn1.Marshal(tbs)
	require.NoError(t, err)
	outer.TBS = asn1.RawValue{FullBytes: tbsDER}
	der, err := asn1.Marshal(outer)
	require.NoError(t, err)
	return der
}
