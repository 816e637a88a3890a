package identity

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/identity/certpem"
)

// maxBundleRoots bounds how many roots a bundle may hold; a real rotation
// needs two or three.
const maxBundleRoots = 64

// Bundle is an immutable set of trust anchors. A certificate chain is
// trusted when it leads to any of them, which is what lets an installation
// rotate its anchor: publish a bundle with the old and the new root, move
// issuers to the new root, then drop the old one.
type Bundle struct {
	roots []*x509.Certificate
	pool  *x509.CertPool
	pem   []byte
}

// BundleSource supplies the current trust bundle. *Bundle is a source of
// itself; *BundleFile follows a file on disk.
type BundleSource interface {
	Bundle() *Bundle
}

// NewBundle builds a bundle from parsed root certificates. Each must be a
// CA certificate.
func NewBundle(roots ...*x509.Certificate) (*Bundle, error) {
	if len(roots) == 0 {
		return nil, errors.New("identity: trust bundle: no certificates")
	}
	if len(roots) > maxBundleRoots {
		return nil, fmt.Errorf("identity: trust bundle: %d certificates exceed the limit of %d", len(roots), maxBundleRoots)
	}
	b := &Bundle{pool: x509.NewCertPool()}
	var buf bytes.Buffer
	for i, c := range roots {
		if c == nil {
			return nil, fmt.Errorf("identity: trust bundle: certificate %d is nil", i)
		}
		if !c.IsCA || !c.BasicConstraintsValid {
			return nil, fmt.Errorf("identity: trust bundle: certificate %d (%s) is not a CA", i, c.Subject)
		}
		b.roots = append(b.roots, c)
		b.pool.AddCert(c)
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	b.pem = buf.Bytes()
	return b, nil
}

// ParseBundle parses a PEM bundle of one or more CA certificates. Blocks
// other than CERTIFICATE, trailing garbage and non-CA certificates are
// errors, so a truncated or mixed-up file never loads half-way.
func ParseBundle(data []byte) (*Bundle, error) {
	certs, err := certpem.ParseCertificates(data)
	if err != nil {
		return nil, fmt.Errorf("identity: trust bundle: %w", err)
	}
	return NewBundle(certs...)
}

// Bundle returns b itself, so a *Bundle is a BundleSource.
func (b *Bundle) Bundle() *Bundle { return b }

// Roots returns the bundle's certificates. The slice is a copy.
func (b *Bundle) Roots() []*x509.Certificate { return append([]*x509.Certificate(nil), b.roots...) }

// Pool returns a new certificate pool holding the roots.
func (b *Bundle) Pool() *x509.CertPool { return b.pool.Clone() }

// PEM returns the bundle in PEM form.
func (b *Bundle) PEM() []byte { return bytes.Clone(b.pem) }

// Contains reports whether c is one of the roots.
func (b *Bundle) Contains(c *x509.Certificate) bool {
	for _, r := range b.roots {
		if r.Equal(c) {
			return true
		}
	}
	return false
}

// Verify checks that leaf chains to one of the roots through intermediates
// at time at, for the given extended key usages (any usage when none are
// given). It returns the verified chains.
func (b *Bundle) Verify(leaf *x509.Certificate, intermediates []*x509.Certificate, at time.Time, usages ...x509.ExtKeyUsage) ([][]*x509.Certificate, error) {
	if leaf == nil {
		return nil, errors.New("identity: verify: no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range intermediates {
		inter.AddCert(c)
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         b.pool,
		Intermediates: inter,
		CurrentTime:   at,
		KeyUsages:     usages,
	})
	if err != nil {
		return nil, fmt.Errorf("identity: verify %s: %w", leaf.Subject, err)
	}
	return chains, nil
}
