package certpem_test

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity/certpem"
)

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestParseCertificatesAcceptsOnlyWholeCertificateFiles(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "issuer"})
	truncated := anchor.CertPEM[:len(anchor.CertPEM)-40]
	for _, tc := range []struct {
		name    string
		data    []byte
		want    int
		wantErr string
	}{
		{name: "one certificate", data: anchor.CertPEM, want: 1},
		{name: "two certificates", data: cat(issuer.CertPEM, anchor.CertPEM), want: 2},
		{name: "text before and between blocks, as OpenSSL writes", data: cat([]byte("Bag Attributes\n"), issuer.CertPEM, []byte("subject=root\n"), anchor.CertPEM, []byte("\n\n")), want: 2},
		{name: "empty", data: nil, wantErr: "no PEM certificate found"},
		{name: "no PEM at all", data: []byte("hello"), wantErr: "no PEM certificate found"},
		{name: "a key among the certificates", data: cat(anchor.CertPEM, anchor.KeyPEM), wantErr: `PEM block 2 is "EC PRIVATE KEY", want CERTIFICATE`},
		{name: "a truncated last certificate", data: cat(issuer.CertPEM, truncated), wantErr: "data that is not PEM after the last certificate"},
		{name: "trailing text", data: cat(anchor.CertPEM, []byte("# end\n")), wantErr: "data that is not PEM after the last certificate"},
		{name: "a CERTIFICATE block that is not DER", data: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), wantErr: "PEM block 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certs, err := certpem.ParseCertificates(tc.data)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "certpem: ")
				assert.Nil(t, certs, "nothing is returned on error")
				return
			}
			require.NoError(t, err)
			assert.Len(t, certs, tc.want)
		})
	}
}

func TestParsePrivateKeyReadsTheThreeEncodingsAndNothingElse(t *testing.T) {
	ec := testutil.GenerateKey(t, testutil.ECDSAP256)
	ed := testutil.GenerateKey(t, testutil.Ed25519)
	rsaKey := testutil.GenerateKey(t, testutil.RSA2048)
	for _, tc := range []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{name: "SEC 1", data: testutil.KeyPEM(t, ec)},
		{name: "PKCS#8", data: testutil.KeyPEM(t, ed)},
		{name: "PKCS#1", data: rsaPKCS1(t, rsaKey)},
		{name: "empty", data: nil, wantErr: "no PEM private key found"},
		{name: "two keys", data: cat(testutil.KeyPEM(t, ec), testutil.KeyPEM(t, ed)), wantErr: "data after the private key"},
		{name: "a certificate instead", data: testutil.NewAnchor(t, testutil.CertOptions{}).CertPEM, wantErr: `PEM block is "CERTIFICATE"`},
		{name: "a key block that is not DER", data: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")}), wantErr: "certpem: private key:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := certpem.ParsePrivateKey(tc.data)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Nil(t, k)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, k.Public())
		})
	}
}

func rsaPKCS1(t *testing.T, k crypto.Signer) []byte {
	t.Helper()
	r, ok := k.(*rsa.PrivateKey)
	require.True(t, ok)
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(r)})
}

func TestParseKeyPairRequiresTheKeyOfTheFirstCertificate(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "issuer"})
	other := anchor.Issuer(t, testutil.CertOptions{Name: "other"})

	cert, chain, key, err := certpem.ParseKeyPair(cat(issuer.CertPEM, anchor.CertPEM), issuer.KeyPEM)
	require.NoError(t, err)
	assert.True(t, cert.Equal(issuer.Cert))
	require.Len(t, chain, 1)
	assert.True(t, chain[0].Equal(anchor.Cert))
	assert.NoError(t, certpem.KeyMatches(cert, key.Public()))

	_, _, _, err = certpem.ParseKeyPair(issuer.CertPEM, other.KeyPEM)
	assert.ErrorContains(t, err, `the private key does not belong to the certificate "CN=issuer"`)
	_, _, _, err = certpem.ParseKeyPair(cat(anchor.CertPEM, issuer.CertPEM), issuer.KeyPEM)
	assert.ErrorContains(t, err, "does not belong", "the key must match the first certificate, not any")
	_, _, _, err = certpem.ParseKeyPair(issuer.KeyPEM, issuer.KeyPEM)
	assert.ErrorContains(t, err, "want CERTIFICATE")
	_, _, _, err = certpem.ParseKeyPair(issuer.CertPEM, issuer.CertPEM)
	assert.ErrorContains(t, err, "want EC PRIVATE KEY")
}

// FuzzParseKeyPair feeds arbitrary certificate and key files: the reader
// never panics, and whatever it accepts is a certificate with its own key.
func FuzzParseKeyPair(f *testing.F) {
	anchor := testutil.NewAnchor(f, testutil.CertOptions{Name: "root"})
	issuer := anchor.Issuer(f, testutil.CertOptions{Name: "issuer"})
	f.Add(issuer.CertPEM, issuer.KeyPEM)
	f.Add(cat(issuer.CertPEM, anchor.CertPEM), issuer.KeyPEM)
	f.Add(issuer.CertPEM, anchor.KeyPEM)
	f.Add(cat(issuer.CertPEM, []byte("-----BEGIN CERTIFICATE-----\nMII")), issuer.KeyPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), []byte(""))
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		certs, certErr := certpem.ParseCertificates(certPEM)
		if certErr == nil {
			require.NotEmpty(t, certs)
		}
		cert, chain, key, err := certpem.ParseKeyPair(certPEM, keyPEM)
		if err != nil {
			assert.Nil(t, cert)
			assert.Nil(t, chain)
			assert.Nil(t, key)
			return
		}
		require.NoError(t, certErr)
		assert.Len(t, chain, len(certs)-1)
		assert.NoError(t, certpem.KeyMatches(cert, key.Public()))
	})
}
