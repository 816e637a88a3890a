package identity_test

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

func TestCheckCSRAcceptsEachAllowedKeyType(t *testing.T) {
	name := mustName(t, "shop", "web")
	for _, kt := range []testutil.KeyType{testutil.ECDSAP256, testutil.ECDSAP384, testutil.Ed25519} {
		der := testutil.CSR(t, testutil.GenerateKey(t, kt), name.String())
		csr, err := identity.ParseCSR(der)
		require.NoError(t, err)
		assert.NoError(t, identity.CheckCSR(csr, name), "key type %d", kt)
	}
}

func TestParseCSRAcceptsPEM(t *testing.T) {
	name := mustName(t, "shop", "web")
	der := testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), name.String())
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	csr, err := identity.ParseCSR(pemBytes)
	require.NoError(t, err)
	assert.NoError(t, identity.CheckCSR(csr, name))
}

func TestCheckCSRAcceptsMatchingCommonName(t *testing.T) {
	name := mustName(t, "shop", "web")
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	der := csrDER(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name.String()}, DNSNames: []string{name.String()}}, key)
	csr, err := identity.ParseCSR(der)
	require.NoError(t, err)
	assert.NoError(t, identity.CheckCSR(csr, name))
}

// TestCheckCSRRefuses is the CSR matrix of BAD-INPUTS T17: every case must
// be refused with ErrInvalidCSR and a message naming what was wrong.
func TestCheckCSRRefuses(t *testing.T) {
	name := mustName(t, "shop", "web")
	other := mustName(t, "shop", "admin")
	key := testutil.GenerateKey(t, testutil.ECDSAP256)
	caExt := func(isCA bool) pkix.Extension {
		v, err := asn1.Marshal(struct {
			IsCA bool `asn1:"optional"`
		}{isCA})
		require.NoError(t, err)
		return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 19}, Critical: true, Value: v}
	}
	kuExt := func(bit int) pkix.Extension {
		b := make([]byte, 2)
		b[bit/8] |= 0x80 >> (bit % 8)
		v, err := asn1.Marshal(asn1.BitString{Bytes: b, BitLength: 9})
		require.NoError(t, err)
		return pkix.Extension{Id: asn1.ObjectIdentifier{2, 5, 29, 15}, Critical: true, Value: v}
	}
	badSig := func() []byte {
		der := testutil.CSR(t, key, name.String())
		der[len(der)-3] ^= 0xff // inside the signature value
		return der
	}

	cases := []struct {
		name string
		der  []byte
		want string
	}{
		{"zero SANs", csrDER(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name.String()}}, key), "no DNS SAN"},
		{"two DNS SANs", testutil.CSR(t, key, name.String(), other.String()), "2 DNS SANs"},
		{"SAN for another identity", testutil.CSR(t, key, other.String()), "does not match"},
		{"SAN for another namespace", testutil.CSR(t, key, mustName(t, "bank", "web").String()), "does not match"},
		{"IP SAN", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, key), "IP address SANs"},
		{"email SAN", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, EmailAddresses: []string{"a@example.com"}}, key), "email SANs"},
		{"URI SAN", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, URIs: []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/shop/sa/web"}}}, key), "URI SANs"},
		{"only a URI SAN", csrDER(t, &x509.CertificateRequest{URIs: []*url.URL{{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/shop/sa/web"}}}, key), "no DNS SAN"},
		{"common name mismatch", csrDER(t, &x509.CertificateRequest{Subject: pkix.Name{CommonName: other.String()}, DNSNames: []string{name.String()}}, key), "common name"},
		{"CA:true request", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, ExtraExtensions: []pkix.Extension{caExt(true)}}, key), "CA certificate"},
		{"keyCertSign request", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, ExtraExtensions: []pkix.Extension{kuExt(5)}}, key), "keyCertSign"},
		{"cRLSign request", csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, ExtraExtensions: []pkix.Extension{kuExt(6)}}, key), "keyCertSign or cRLSign"},
		{"bad signature", badSig(), "bad signature"},
		{"RSA-2048 key", testutil.CSR(t, testutil.GenerateKey(t, testutil.RSA2048), name.String()), "RSA-2048"},
		{"RSA-1024 key", csrWithRSAKey(t, name.String(), 1024), "RSA-1024"},
		{"RSA-16384 key", csrWithRSAKey(t, name.String(), 16384), "RSA-16384"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr, err := identity.ParseCSR(tc.der)
			require.NoError(t, err, "the CSR should parse; CheckCSR must refuse it")
			err = identity.CheckCSR(csr, name)
			require.Error(t, err)
			assert.ErrorIs(t, err, identity.ErrInvalidCSR)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// A CA:false basicConstraints request is harmless and accepted.
	csr, err := identity.ParseCSR(csrDER(t, &x509.CertificateRequest{DNSNames: []string{name.String()}, ExtraExtensions: []pkix.Extension{caExt(false)}}, key))
	require.NoError(t, err)
	assert.NoError(t, identity.CheckCSR(csr, name))
}

func TestParseCSRRefusesGarbageAndOversizedInput(t *testing.T) {
	big := make([]byte, 1<<20)
	_, err := rand.Read(big)
	require.NoError(t, err)
	cases := map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("this is not a certificate request"),
		"1 MiB":          big,
		"certificate":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}),
		"truncated PEM":  []byte("-----BEGIN CERTIFICATE REQUEST-----\nMIIB"),
		"truncated DER":  testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), "x")[:40],
		"trailing bytes": append(testutil.CSR(t, testutil.GenerateKey(t, testutil.ECDSAP256), "x"), 0, 0),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := identity.ParseCSR(in)
			require.Error(t, err)
			assert.ErrorIs(t, err, identity.ErrInvalidCSR)
		})
	}
}

// FuzzCSR feeds arbitrary bytes through the whole CSR path; it must never
// panic, and anything it accepts must satisfy the invariants.
func FuzzCSR(f *testing.F) {
	name, err := identity.DefaultDomain().Name("shop", "web")
	if err != nil {
		f.Fatal(err)
	}
	key := testutil.GenerateKey(f, testutil.ECDSAP256)
	good := testutil.CSR(f, key, name.String())
	f.Add(good)
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: good}))
	f.Add(testutil.CSR(f, key, name.String(), "x.example"))
	f.Add([]byte{0x30, 0x82, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		csr, err := identity.ParseCSR(data)
		if err != nil {
			return
		}
		if err := identity.CheckCSR(csr, name); err != nil {
			return
		}
		if len(csr.DNSNames) != 1 || csr.DNSNames[0] != name.String() || len(csr.URIs)+len(csr.IPAddresses)+len(csr.EmailAddresses) != 0 {
			t.Fatalf("accepted CSR with SANs %v %v %v %v", csr.DNSNames, csr.URIs, csr.IPAddresses, csr.EmailAddresses)
		}
		if err := csr.CheckSignature(); err != nil {
			t.Fatalf("accepted CSR with a bad signature: %v", err)
		}
	})
}
