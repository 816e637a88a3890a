// Package testutil holds helpers shared by Weft's tests: a run-time PKI
// (trust anchor, issuer, leaves with chosen names, lifetimes and key types),
// free loopback ports and bounded waits. Nothing here is for production use.
package testutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KeyType selects the algorithm of a generated key.
type KeyType int

// Key types a test can ask for.
const (
	ECDSAP256 KeyType = iota
	ECDSAP384
	Ed25519
	RSA2048
)

// GenerateKey returns a fresh private key of the given type.
func GenerateKey(t testing.TB, kt KeyType) crypto.Signer {
	t.Helper()
	var (
		k   crypto.Signer
		err error
	)
	switch kt {
	case ECDSAP256:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case Ed25519:
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case RSA2048:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		t.Fatalf("testutil: unknown key type %d", kt)
	}
	if err != nil {
		t.Fatalf("testutil: generate key: %v", err)
	}
	return k
}

// CA is a certificate authority made at run time: a trust anchor or an
// intermediate issuer.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
	// Chain holds the certificates between this CA and the trust anchor,
	// this CA first, the anchor excluded.
	Chain []*x509.Certificate
}

// CertOptions tunes a certificate made by NewAnchor, Issuer or Leaf.
type CertOptions struct {
	// Name is the subject common name and, for leaves, the DNS SAN unless
	// DNSNames is set.
	Name string
	// DNSNames, IPs and URIs become the certificate's SANs.
	DNSNames []string
	IPs      []net.IP
	URIs     []*url.URL
	// NotBefore defaults to one minute ago; Lifetime defaults to 24h.
	NotBefore time.Time
	Lifetime  time.Duration
	KeyType   KeyType
	// Key, when set, is used instead of generating one.
	Key crypto.Signer
}

func (o CertOptions) window() (time.Time, time.Time) {
	nb := o.NotBefore
	if nb.IsZero() {
		nb = time.Now().Add(-time.Minute)
	}
	lt := o.Lifetime
	if lt == 0 {
		lt = 24 * time.Hour
	}
	return nb, nb.Add(lt)
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testutil: serial: %v", err)
	}
	return n
}

// NewAnchor makes a self-signed root CA.
func NewAnchor(t testing.TB, opts CertOptions) *CA {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "root.weft.test"
	}
	key := opts.Key
	if key == nil {
		key = GenerateKey(t, opts.KeyType)
	}
	nb, na := opts.window()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: opts.Name},
		NotBefore:             nb,
		NotAfter:              na,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return makeCA(t, tmpl, tmpl, key, key, nil)
}

// Issuer makes an intermediate CA signed by ca.
func (ca *CA) Issuer(t testing.TB, opts CertOptions) *CA {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "identity.weft.cluster.local"
	}
	key := opts.Key
	if key == nil {
		key = GenerateKey(t, opts.KeyType)
	}
	nb, na := opts.window()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: opts.Name},
		NotBefore:             nb,
		NotAfter:              na,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	return makeCA(t, tmpl, ca.Cert, key, ca.Key, ca.Chain)
}

func makeCA(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey crypto.Signer, parentChain []*x509.Certificate) *CA {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatalf("testutil: create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testutil: parse CA certificate: %v", err)
	}
	var chain []*x509.Certificate
	if tmpl != parent {
		chain = append([]*x509.Certificate{cert}, parentChain...)
	}
	return &CA{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  KeyPEM(t, key),
		Chain:   chain,
	}
}

// Leaf is an end-entity certificate with its key.
type Leaf struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
	// ChainPEM is the leaf followed by its intermediates (not the anchor).
	ChainPEM []byte
	// TLS is ready for tls.Config.Certificates.
	TLS tls.Certificate
}

// Leaf issues an end-entity certificate for serverAuth and clientAuth. The
// DNS SAN defaults to opts.Name.
func (ca *CA) Leaf(t testing.TB, opts CertOptions) *Leaf {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "default.default.serviceaccount.identity.weft.cluster.local"
	}
	dns := opts.DNSNames
	if dns == nil && opts.IPs == nil && opts.URIs == nil {
		dns = []string{opts.Name}
	}
	key := opts.Key
	if key == nil {
		key = GenerateKey(t, opts.KeyType)
	}
	nb, na := opts.window()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: opts.Name},
		NotBefore:             nb,
		NotAfter:              na,
		DNSNames:              dns,
		IPAddresses:           opts.IPs,
		URIs:                  opts.URIs,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatalf("testutil: create leaf: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testutil: parse leaf: %v", err)
	}
	l := &Leaf{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  KeyPEM(t, key),
	}
	l.ChainPEM = append([]byte{}, l.CertPEM...)
	l.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}
	for _, c := range ca.Chain {
		l.ChainPEM = append(l.ChainPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
		l.TLS.Certificate = append(l.TLS.Certificate, c.Raw)
	}
	return l
}

// Pool returns a cert pool holding the given CAs' certificates.
func Pool(cas ...*CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// BundlePEM concatenates the CAs' certificates into one PEM bundle.
func BundlePEM(cas ...*CA) []byte {
	var out []byte
	for _, ca := range cas {
		out = append(out, ca.CertPEM...)
	}
	return out
}

// KeyPEM encodes a private key as PKCS#8 PEM ("PRIVATE KEY"); ECDSA keys use
// the SEC 1 form ("EC PRIVATE KEY") that Linkerd's issuer secrets carry.
func KeyPEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	if ec, ok := key.(*ecdsa.PrivateKey); ok {
		der, err := x509.MarshalECPrivateKey(ec)
		if err != nil {
			t.Fatalf("testutil: marshal EC key: %v", err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testutil: marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// CSR builds a DER certificate signing request for the given DNS names with
// key, signed by key.
func CSR(t testing.TB, key crypto.Signer, dnsNames ...string) []byte {
	t.Helper()
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: cn},
		DNSNames: dnsNames,
	}, key)
	if err != nil {
		t.Fatalf("testutil: create CSR: %v", err)
	}
	return der
}

// WriteIssuerDir writes ca's certificate and key into dir using the
// linkerd.io/tls layout (crt.pem, key.pem) or, when kubeLayout is true, the
// kubernetes.io/tls layout (tls.crt, tls.key). It returns dir.
func (ca *CA) WriteIssuerDir(t testing.TB, dir string, kubeLayout bool) string {
	t.Helper()
	crt, key := "crt.pem", "key.pem"
	if kubeLayout {
		crt, key = "tls.crt", "tls.key"
	}
	WriteFile(t, filepath.Join(dir, crt), ca.CertPEM)
	WriteFile(t, filepath.Join(dir, key), ca.KeyPEM)
	return dir
}

// WriteFile writes data to path (creating parent directories) or fails the test.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("testutil: mkdir %s: %v", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testutil: write %s: %v", path, err)
	}
}
