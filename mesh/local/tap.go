package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// Tap in the local mesh: every proxy serves io.linkerd.proxy.tap on its
// pod address at TapPort, over mutual TLS, to one identity only,
// TapperIdentity. The runner issues a certificate for that identity from
// the mesh's own issuer when it starts, hands it out in State.Tap, and
// writes it under the mesh's directory (tap/), so a client in this
// process or another one (weft viz --local DIR) can tap every pod.

// TapperServiceAccount and TapperNamespace make the tapper's identity:
// TapperIdentity, weft-tap.weft.serviceaccount.identity.weft.cluster.local
// (the identity `weft install` gives its tapper service account).
const (
	TapperServiceAccount = "weft-tap"
	TapperNamespace      = vocab.DefaultControlPlaneNamespace
)

// TapperIdentity is the only identity the local mesh's proxies accept as
// a tapper.
var TapperIdentity = identity.Name{ServiceAccount: TapperServiceAccount, Namespace: TapperNamespace, Domain: Domain}.String()

// Files of the tapper's credentials, in the tap/ directory of the mesh.
const (
	TapDir      = "tap"
	TapCertFile = "tls.crt" // the tapper's certificate chain, PEM
	TapKeyFile  = "tls.key" // its private key, PEM
	TapCAFile   = "ca.crt"  // the mesh's trust anchors, PEM
)

// Tap is what a client needs to tap the local mesh: the tapper identity,
// its certificate and the roots that verify the proxies. Each pod's tap
// address is Pod.Tap; the server to expect there is Pod.Identity.
type Tap struct {
	Identity    string
	Certificate tls.Certificate
	Roots       *x509.CertPool
	// Dir holds the same credentials as files (TapCertFile, TapKeyFile,
	// TapCAFile).
	Dir string
}

// TLSConfig returns a client configuration for tapping the proxy of pod:
// TLS 1.3, the tapper's certificate, the pod's identity as the server
// name, verified against the mesh's roots.
func (t *Tap) TLSConfig(pod Pod) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{t.Certificate},
		RootCAs:      t.Roots,
		ServerName:   pod.Identity,
		NextProtos:   []string{"h2"},
	}
}

// LoadTap reads the tapper's credentials of a running local mesh from its
// directory (State.Dir, printed by weft demo and weft dev).
func LoadTap(dir string) (*Tap, error) {
	d := filepath.Join(dir, TapDir)
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			return nil, fmt.Errorf("local: tap credentials: %w", err)
		}
		return b, nil
	}
	certPEM, err := read(TapCertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(TapKeyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := read(TapCAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("local: tap credentials in %s: %w", d, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("local: tap credentials in %s: no certificate in %s", d, TapCAFile)
	}
	return &Tap{Identity: TapperIdentity, Certificate: cert, Roots: roots, Dir: d}, nil
}

// writeTapper issues the tapper's certificate from issuer (lifetime: a
// day, within the issuer's) and writes it with anchorPEM into dir/tap.
func writeTapper(dir string, issuer *pki.KeyPair, anchorPEM []byte) (*Tap, error) {
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("local: tapper: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("local: tapper key: %w", err)
	}
	name, err := Domain.Name(TapperNamespace, TapperServiceAccount)
	if err != nil {
		return nil, fmt.Errorf("local: tapper: %w", err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name.String()}}, key)
	if err != nil {
		return nil, fmt.Errorf("local: tapper CSR: %w", err)
	}
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, fmt.Errorf("local: tapper CSR: %w", err)
	}
	now := time.Now()
	issued, err := ca.Issue(context.Background(), identity.IssueRequest{CSR: csr, Name: name, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		return nil, fmt.Errorf("local: tapper: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("local: tapper key: %w", err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issued.Leaf.Raw})
	for _, c := range issued.Intermediates {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	chain = append(chain, issuer.CertPEM...)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	d := filepath.Join(dir, TapDir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{TapCertFile, chain, 0o644}, {TapKeyFile, keyPEM, 0o600}, {TapCAFile, anchorPEM, 0o644}} {
		if err := os.WriteFile(filepath.Join(d, f.name), f.data, f.mode); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	return LoadTap(dir)
}
