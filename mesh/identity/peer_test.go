package identity_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// signLeaf signs tmpl with issuer for a fresh P-256 key and returns DER.
func signLeaf(t testing.TB, issuer *testutil.CA, tmpl *x509.Certificate) []byte {
	t.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Minute)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(time.Hour)
	}
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer.Cert, key.Public(), issuer.Key)
	require.NoError(t, err)
	return der
}

func TestVerifyPeerReturnsTheIdentityOfAGoodChain(t *testing.T) {
	p := newPKI(t)
	name := mustName(t, "shop", "web")
	is := issue(t, p.ca, name, testutil.ECDSAP256, time.Hour)
	raw := [][]byte{is.Leaf.Raw, is.Intermediates[0].Raw}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		got, err := identity.VerifyPeer(p.bundle, raw, time.Now(), usage)
		require.NoError(t, err)
		assert.Equal(t, name, got)
	}
}

// TestVerifyPeerRefuses covers BAD-INPUTS T21 and T23 at the certificate
// level: each peer chain must be refused.
func TestVerifyPeerRefuses(t *testing.T) {
	p := newPKI(t)
	name := mustName(t, "shop", "web").String()
	inter := p.issuer.Cert.Raw
	base := func() *x509.Certificate {
		return &x509.Certificate{
			Subject:               pkix.Name{CommonName: name},
			DNSNames:              []string{name},
			KeyUsage:              x509.KeyUsageDigitalSignature,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true,
		}
	}
	with := func(f func(c *x509.Certificate)) [][]byte {
		c := base()
		f(c)
		return [][]byte{signLeaf(t, p.issuer, c), inter}
	}
	otherRoot := testutil.NewAnchor(t, testutil.CertOptions{Name: "other"})
	otherIssuer := otherRoot.Issuer(t, testutil.CertOptions{Name: "other-issuer"})
	long := make([][]byte, identity.MaxPeerChain+1)
	for i := range long {
		long[i] = inter
	}

	cases := []struct {
		name  string
		raw   [][]byte
		usage x509.ExtKeyUsage
	}{
		{"no certificate", nil, x509.ExtKeyUsageServerAuth},
		{"garbage DER", [][]byte{[]byte("garbage")}, x509.ExtKeyUsageServerAuth},
		{"leaf with CA:true", with(func(c *x509.Certificate) { c.IsCA = true; c.KeyUsage |= x509.KeyUsageCertSign }), x509.ExtKeyUsageServerAuth},
		{"leaf with keyCertSign", with(func(c *x509.Certificate) { c.KeyUsage |= x509.KeyUsageCertSign }), x509.ExtKeyUsageServerAuth},
		{"no clientAuth EKU", with(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }), x509.ExtKeyUsageClientAuth},
		{"no serverAuth EKU", with(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }), x509.ExtKeyUsageServerAuth},
		{"emailProtection only", with(func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection} }), x509.ExtKeyUsageClientAuth},
		{"identity only in a URI SAN", with(func(c *x509.Certificate) {
			c.DNSNames = nil
			c.URIs = []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/shop/sa/web"}}
		}), x509.ExtKeyUsageServerAuth},
		{"identity only in the common name", with(func(c *x509.Certificate) { c.DNSNames = nil }), x509.ExtKeyUsageServerAuth},
		{"identity as an email SAN", with(func(c *x509.Certificate) { c.EmailAddresses = []string{"web@shop"} }), x509.ExtKeyUsageServerAuth},
		{"two DNS SANs", with(func(c *x509.Certificate) { c.DNSNames = append(c.DNSNames, "x.example") }), x509.ExtKeyUsageServerAuth},
		{"DNS SAN that is not a mesh name", with(func(c *x509.Certificate) { c.DNSNames = []string{"www.example.com"} }), x509.ExtKeyUsageServerAuth},
		{"expired", with(func(c *x509.Certificate) {
			c.NotBefore = time.Now().Add(-2 * time.Hour)
			c.NotAfter = time.Now().Add(-time.Hour)
		}), x509.ExtKeyUsageServerAuth},
		{"not yet valid", with(func(c *x509.Certificate) {
			c.NotBefore = time.Now().Add(time.Hour)
			c.NotAfter = time.Now().Add(2 * time.Hour)
		}), x509.ExtKeyUsageServerAuth},
		{"other trust anchor", [][]byte{signLeaf(t, otherIssuer, base()), otherIssuer.Cert.Raw}, x509.ExtKeyUsageServerAuth},
		{"missing intermediate", [][]byte{signLeaf(t, p.issuer, base())}, x509.ExtKeyUsageServerAuth},
		{"too many certificates", append([][]byte{signLeaf(t, p.issuer, base())}, long...), x509.ExtKeyUsageServerAuth},
		{"thousands of SANs", with(func(c *x509.Certificate) {
			for i := 0; i < 5000; i++ {
				c.DNSNames = append(c.DNSNames, fmt.Sprintf("n%d.example", i))
			}
		}), x509.ExtKeyUsageServerAuth},
		{"an empty DNS SAN", with(func(c *x509.Certificate) { c.DNSNames = []string{""} }), x509.ExtKeyUsageServerAuth},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := identity.VerifyPeer(p.bundle, tc.raw, time.Now(), tc.usage)
			require.Error(t, err)
			assert.ErrorIs(t, err, identity.ErrPeerRejected)
		})
	}
	// The base template itself is fine: the refusals above come from the
	// single change each case makes.
	_, err := identity.VerifyPeer(p.bundle, with(func(*x509.Certificate) {}), time.Now(), x509.ExtKeyUsageServerAuth)
	assert.NoError(t, err)
}

// FuzzVerifyPeer feeds arbitrary leaf bytes (with the real intermediate)
// through peer verification: it must never panic, and must never accept
// anything but a certificate that really chains to the bundle.
func FuzzVerifyPeer(f *testing.F) {
	p := newPKI(f)
	good := issue(f, p.ca, mustName(f, "shop", "web"), testutil.ECDSAP256, time.Hour)
	f.Add(good.Leaf.Raw)
	f.Add(p.issuer.Cert.Raw)
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, leaf []byte) {
		name, err := identity.VerifyPeer(p.bundle, [][]byte{leaf, p.issuer.Cert.Raw}, time.Now(), x509.ExtKeyUsageClientAuth)
		if err != nil {
			return
		}
		c, perr := x509.ParseCertificate(leaf)
		if perr != nil || c.IsCA || len(c.DNSNames) != 1 || c.DNSNames[0] != name.String() {
			t.Fatalf("accepted an unfit leaf for %s", name)
		}
		if err := c.CheckSignatureFrom(p.issuer.Cert); err != nil {
			t.Fatalf("accepted a leaf the issuer did not sign: %v", err)
		}
	})
}
