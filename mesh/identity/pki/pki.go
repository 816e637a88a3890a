package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/identity/certpem"
)

// Defaults.
const (
	DefaultLifetime         = 365 * 24 * time.Hour
	DefaultAnchorName       = "root.weft.cluster.local"
	DefaultIssuerName       = "identity.weft.cluster.local"
	ExpiryWarning           = 30 * 24 * time.Hour
	defaultBackdate         = time.Minute
	maxCommonNameCharacters = 64
)

// KeyPair is a CA certificate with its private key, parsed and in PEM.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	// KeyPEM is SEC 1 ("EC PRIVATE KEY"), as Linkerd's issuer secrets hold.
	KeyPEM []byte
}

// Options tune NewAnchor and NewIssuer.
type Options struct {
	// CommonName of the subject (defaults: DefaultAnchorName,
	// DefaultIssuerName).
	CommonName string
	// Lifetime of the certificate (default one year).
	Lifetime time.Duration
	// Now is the issuance time (default time.Now()); NotBefore is one
	// minute earlier.
	Now time.Time
}

func (o Options) resolve(defaultName string) (Options, error) {
	if o.CommonName == "" {
		o.CommonName = defaultName
	}
	if len(o.CommonName) > maxCommonNameCharacters {
		return o, fmt.Errorf("pki: common name %q is longer than %d characters", o.CommonName, maxCommonNameCharacters)
	}
	if o.Lifetime == 0 {
		o.Lifetime = DefaultLifetime
	}
	if o.Lifetime < time.Hour {
		return o, fmt.Errorf("pki: lifetime %s is shorter than one hour", o.Lifetime)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	return o, nil
}

// NewAnchor creates a self-signed trust anchor.
func NewAnchor(opts Options) (*KeyPair, error) {
	o, err := opts.resolve(DefaultAnchorName)
	if err != nil {
		return nil, err
	}
	tmpl := caTemplate(o, 1)
	return sign(tmpl, nil)
}

// NewIssuer creates an identity issuer signed by anchor. Its lifetime is
// capped at the anchor's expiry.
func NewIssuer(anchor *KeyPair, opts Options) (*KeyPair, error) {
	if anchor == nil || anchor.Cert == nil || anchor.Key == nil {
		return nil, errors.New("pki: an anchor with its key is required")
	}
	if !anchor.Cert.IsCA {
		return nil, fmt.Errorf("pki: anchor %q is not a CA", anchor.Cert.Subject)
	}
	o, err := opts.resolve(DefaultIssuerName)
	if err != nil {
		return nil, err
	}
	if o.Now.After(anchor.Cert.NotAfter) {
		return nil, fmt.Errorf("pki: anchor %q expired at %s", anchor.Cert.Subject, anchor.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl := caTemplate(o, 0)
	if tmpl.NotAfter.After(anchor.Cert.NotAfter) {
		tmpl.NotAfter = anchor.Cert.NotAfter
	}
	return sign(tmpl, anchor)
}

func caTemplate(o Options, pathLen int) *x509.Certificate {
	return &x509.Certificate{
		Subject:               pkix.Name{CommonName: o.CommonName},
		NotBefore:             o.Now.Add(-defaultBackdate).UTC().Truncate(time.Second),
		NotAfter:              o.Now.Add(o.Lifetime).UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
	}
}

func sign(tmpl *x509.Certificate, parent *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	tmpl.SerialNumber = serial.Add(serial, big.NewInt(1))
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", tmpl.Subject, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// ParseKeyPair parses a CA certificate PEM (first certificate) and its
// private key PEM with certpem.ParseKeyPair, which checks that they belong
// together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cert, _, key, err := certpem.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return &KeyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// FindCertificates collects the certificates of a PEM file and skips every
// other block (a private key kept in the same file, parameters) and the
// text around them, which is what inspecting a file someone hands over
// needs. A CERTIFICATE block that does not parse is an error, and so is a
// file without any. To read a file that must hold only certificates (a
// trust bundle), use certpem.ParseCertificates.
func FindCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := data
	for i := 1; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: PEM block %d: %w", i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("pki: no PEM certificate found")
	}
	return out, nil
}

// Report describes one certificate.
type Report struct {
	Source     string
	Subject    string
	Issuer     string
	Serial     string
	DNSNames   []string
	URIs       []string
	IPs        []string
	IsCA       bool
	SelfSigned bool
	NotBefore  time.Time
	NotAfter   time.Time
	// Chain is nil when the certificate chains to a trust anchor, the
	// verification error otherwise; ChainChecked is false when no anchor
	// was available.
	Chain        error
	ChainChecked bool
	Warnings     []string
}

// OK reports whether nothing is wrong: not expired, not premature, and
// chaining to an anchor when checked.
func (r Report) OK() bool { return r.Chain == nil && !r.expired() }

func (r Report) expired() bool {
	for _, w := range r.Warnings {
		if strings.HasPrefix(w, "EXPIRED") || strings.HasPrefix(w, "NOT YET VALID") {
			return true
		}
	}
	return false
}

// Entry is a certificate and where it came from.
type Entry struct {
	Source string
	Cert   *x509.Certificate
}

// Inspect reports on each entry at time now. A certificate is checked
// against anchors (when nil, the self-signed CAs among the entries act as
// anchors) with the other CA certificates among the entries as
// intermediates.
func Inspect(entries []Entry, anchors []*x509.Certificate, now time.Time) []Report {
	roots := x509.NewCertPool()
	inter := x509.NewCertPool()
	nRoots := 0
	for _, a := range anchors {
		roots.AddCert(a)
		nRoots++
	}
	for _, e := range entries {
		if !e.Cert.IsCA {
			continue
		}
		if isSelfSigned(e.Cert) {
			if anchors == nil {
				roots.AddCert(e.Cert)
				nRoots++
			}
		} else {
			inter.AddCert(e.Cert)
		}
	}
	out := make([]Report, 0, len(entries))
	for _, e := range entries {
		c := e.Cert
		r := Report{
			Source: e.Source, Subject: c.Subject.String(), Issuer: c.Issuer.String(),
			Serial: c.SerialNumber.Text(16), DNSNames: c.DNSNames, IsCA: c.IsCA, SelfSigned: isSelfSigned(c),
			NotBefore: c.NotBefore, NotAfter: c.NotAfter,
		}
		for _, u := range c.URIs {
			r.URIs = append(r.URIs, u.String())
		}
		for _, ip := range c.IPAddresses {
			r.IPs = append(r.IPs, ip.String())
		}
		switch left := c.NotAfter.Sub(now); {
		case left <= 0:
			r.Warnings = append(r.Warnings, fmt.Sprintf("EXPIRED %s ago", (-left).Round(time.Minute)))
		case left < ExpiryWarning:
			r.Warnings = append(r.Warnings, fmt.Sprintf("expires in %s (less than 30 days)", left.Round(time.Minute)))
		}
		if now.Before(c.NotBefore) {
			r.Warnings = append(r.Warnings, "NOT YET VALID until "+c.NotBefore.UTC().Format(time.RFC3339))
		}
		if nRoots > 0 {
			r.ChainChecked = true
			_, r.Chain = c.Verify(x509.VerifyOptions{
				Roots: roots, Intermediates: inter, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
			})
		}
		out = append(out, r)
	}
	return out
}

func isSelfSigned(c *x509.Certificate) bool {
	return bytes.Equal(c.RawIssuer, c.RawSubject) && c.CheckSignatureFrom(c) == nil
}
