package identity_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"strings"
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

// TestVerifyPeerAndVerifyPeerChainApplyTheMeshsOneRule drives both entry
// points with the table every mesh TLS verifier shares
// (testutil.NewPeerChains; the data plane replays it over real
// handshakes). It covers BAD-INPUTS T21 and T23 at the certificate level.
func TestVerifyPeerAndVerifyPeerChainApplyTheMeshsOneRule(t *testing.T) {
	const name = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	pc := testutil.NewPeerChains(t, name)
	bundle, err := identity.NewBundle(pc.Anchor.Cert)
	require.NoError(t, err)
	roots := testutil.Pool(pc.Anchor)
	now := time.Now()
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		got, err := identity.VerifyPeer(bundle, pc.Good.Raw(), now, usage)
		require.NoError(t, err)
		assert.Equal(t, name, got.String())
		got, err = identity.VerifyPeerChain(roots, pc.Good.Certs, now, usage)
		require.NoError(t, err)
		assert.Equal(t, name, got.String())
	}
	for _, c := range pc.Refused {
		for _, usage := range c.Usages {
			t.Run(c.Case+" "+testutil.Role(usage), func(t *testing.T) {
				_, err := identity.VerifyPeer(bundle, c.Raw(), now, usage)
				assert.ErrorIs(t, err, identity.ErrPeerRejected)
				assert.True(t, strings.HasPrefix(err.Error(), "identity: "), err.Error())
				_, err = identity.VerifyPeerChain(roots, c.Certs, now, usage)
				assert.ErrorIs(t, err, identity.ErrPeerRejected)
			})
		}
	}
}

// TestVerifyPeerRefusesWhatOnlyTheRawFormCanCarry: undecodable bytes, a
// missing bundle or pool, nil certificates, and a leaf with thousands of
// SANs.
func TestVerifyPeerRefusesWhatOnlyTheRawFormCanCarry(t *testing.T) {
	p := newPKI(t)
	name := mustName(t, "shop", "web").String()
	inter := p.issuer.Cert.Raw
	good := signLeaf(t, p.issuer, &x509.Certificate{
		Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	many := &x509.Certificate{KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for i := 0; i < 5000; i++ {
		many.DNSNames = append(many.DNSNames, fmt.Sprintf("n%d.example", i))
	}
	usage := x509.ExtKeyUsageClientAuth
	cases := map[string]func() error{
		"garbage DER": func() error {
			_, err := identity.VerifyPeer(p.bundle, [][]byte{[]byte("garbage")}, time.Now(), usage)
			return err
		},
		"garbage intermediate": func() error {
			_, err := identity.VerifyPeer(p.bundle, [][]byte{good, {0x30, 0x00}}, time.Now(), usage)
			return err
		},
		"no bundle": func() error {
			_, err := identity.VerifyPeer(nil, [][]byte{good, inter}, time.Now(), usage)
			return err
		},
		"no roots": func() error {
			_, err := identity.VerifyPeerChain(nil, []*x509.Certificate{p.issuer.Cert}, time.Now(), usage)
			return err
		},
		"a nil leaf": func() error {
			_, err := identity.VerifyPeerChain(p.bundle.Pool(), []*x509.Certificate{nil}, time.Now(), usage)
			return err
		},
		"a nil intermediate": func() error {
			leaf, err := x509.ParseCertificate(good)
			require.NoError(t, err)
			_, err = identity.VerifyPeerChain(p.bundle.Pool(), []*x509.Certificate{leaf, nil}, time.Now(), usage)
			return err
		},
		"thousands of SANs": func() error {
			_, err := identity.VerifyPeer(p.bundle, [][]byte{signLeaf(t, p.issuer, many), inter}, time.Now(), usage)
			return err
		},
	}
	for c, verify := range cases {
		t.Run(c, func(t *testing.T) {
			assert.ErrorIs(t, verify(), identity.ErrPeerRejected)
		})
	}
	_, err := identity.VerifyPeer(p.bundle, [][]byte{good, inter}, time.Now(), usage)
	assert.NoError(t, err, "the good leaf of this test passes")
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
