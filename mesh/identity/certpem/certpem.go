// Package certpem is the one strict reader of PEM certificates and
// private keys used across Weft: trust bundles, issuer key pairs, webhook
// serving certificates and the files the CLI reads all go through it, so
// they accept and refuse the same inputs.
//
// Strict means: every block of a certificate file is a CERTIFICATE, at
// least one is present, and nothing but white space follows the last
// block (a truncated or mixed-up file never loads half-way); a key file
// holds exactly one private key (SEC 1 "EC PRIVATE KEY", PKCS#8 "PRIVATE
// KEY" or PKCS#1 "RSA PRIVATE KEY") that can sign; a key pair's key
// belongs to its first certificate. Text before a block (such as the
// "Bag Attributes" lines OpenSSL writes) is skipped, as encoding/pem does.
// Blocks are counted from 1 in errors.
//
// The package imports only the standard library, so any package may use
// it without linking anything else.
package certpem

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParseCertificates reads PEM data that holds only certificates, at least
// one, and returns them in file order.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := data
	for i := 1; ; i++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("certpem: PEM block %d is %q, want CERTIFICATE", i, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certpem: PEM block %d: %w", i, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("certpem: no PEM certificate found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("certpem: data that is not PEM after the last certificate (a truncated file?)")
	}
	return out, nil
}

// ParsePrivateKey reads PEM data holding exactly one private key that can
// sign: SEC 1, PKCS#8 or PKCS#1.
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	b, rest := pem.Decode(data)
	if b == nil {
		return nil, errors.New("certpem: no PEM private key found")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("certpem: data after the private key's PEM block")
	}
	var (
		k   any
		err error
	)
	switch b.Type {
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("certpem: PEM block is %q, want EC PRIVATE KEY, PRIVATE KEY or RSA PRIVATE KEY", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("certpem: private key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("certpem: private key of type %T cannot sign", k)
	}
	return s, nil
}

// ParseKeyPair reads a certificate file (the certificate first, then the
// certificates above it towards a trust anchor) and its private key file,
// and checks that the key belongs to the first certificate. It checks
// nothing else: validity dates, CA flags and chains are the caller's
// questions.
func ParseKeyPair(certPEM, keyPEM []byte) (cert *x509.Certificate, chain []*x509.Certificate, key crypto.Signer, err error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err = ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := KeyMatches(certs[0], key.Public()); err != nil {
		return nil, nil, nil, err
	}
	return certs[0], certs[1:], key, nil
}

// KeyMatches reports, as an error, when pub is not the public key of c.
func KeyMatches(c *x509.Certificate, pub crypto.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("certpem: public key: %w", err)
	}
	if !bytes.Equal(der, c.RawSubjectPublicKeyInfo) {
		return fmt.Errorf("certpem: the private key does not belong to the certificate %q", c.Subject)
	}
	return nil
}
