package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// runPKI writes DIR/roots.pem (the anchor), and for each -name FILE=ID:
// FILE.crt (leaf then issuer), FILE.key (PKCS#8) and FILE.pem (chain and
// key in one file, as HAProxy wants it). Every key is ECDSA P-256, every
// leaf has ID as its only DNS SAN and both server and client usages, as a
// Weft workload certificate does.
func runPKI(_ context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pki", flag.ContinueOnError)
	dir := fs.String("out", "", "directory to write into (required)")
	var names repeated
	fs.Var(&names, "name", "FILE=IDENTITY, repeatable")
	lifetime := fs.Duration("lifetime", 48*time.Hour, "leaf validity")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || len(names) == 0 {
		return errors.New("-out and at least one -name are required")
	}
	now := time.Now()
	rootKey, rootDER, err := newCert(nil, nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "root.bench.weft"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	})
	if err != nil {
		return err
	}
	root, _ := x509.ParseCertificate(rootDER)
	issKey, issDER, err := newCert(root, rootKey, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "identity.bench.weft"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	})
	if err != nil {
		return err
	}
	iss, _ := x509.ParseCertificate(issDER)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "roots.pem"), pemBlock("CERTIFICATE", rootDER), 0o644); err != nil {
		return err
	}
	for _, n := range names {
		file, id, ok := strings.Cut(n, "=")
		if !ok || file == "" || id == "" {
			return fmt.Errorf("-name %q: want FILE=IDENTITY", n)
		}
		key, der, err := newCert(iss, issKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id},
			DNSNames:    []string{id},
			NotBefore:   now.Add(-time.Minute),
			NotAfter:    now.Add(*lifetime),
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return err
		}
		chain := append(pemBlock("CERTIFICATE", der), pemBlock("CERTIFICATE", issDER)...)
		keyPEM := pemBlock("PRIVATE KEY", keyDER)
		for name, data := range map[string][]byte{
			file + ".crt": chain,
			file + ".key": keyPEM,
			file + ".pem": append(append([]byte{}, chain...), keyPEM...),
		} {
			if err := os.WriteFile(filepath.Join(*dir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "pki=ok dir=%s leaves=%d\n", *dir, len(names))
	return nil
}

// newCert makes a P-256 key and a certificate for tmpl, signed by parent
// (self-signed when parent is nil).
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	return key, der, err
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}
