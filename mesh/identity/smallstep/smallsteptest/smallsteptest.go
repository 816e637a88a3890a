// Package smallsteptest starts a real step-ca authority in-process, on
// loopback, with a throwaway PKI and one JWK provisioner. Tests of the
// smallstep issuer and the examples use it; it is not for production.
//
// What runs is step-ca itself (github.com/smallstep/certificates ca.New and
// its HTTPS server), configured in code: a generated root and intermediate
// written to a temporary directory, no database, and a JWK provisioner
// whose private key the caller receives.
package smallsteptest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/smallstep/certificates/authority/config"
	"github.com/smallstep/certificates/authority/provisioner"
	"github.com/smallstep/certificates/ca"
	"go.step.sm/crypto/jose"
)

// Names of the provisioners the authority has.
const (
	ProvisionerName    = "weft-identity" // JWK
	X5CProvisionerName = "weft-identity-x5c"
)

// Authority is a running step-ca.
type Authority struct {
	// URL is the authority's base URL (https://127.0.0.1:PORT).
	URL string
	// Root and Intermediate are the authority's CA certificates; leaves
	// are signed by Intermediate.
	Root, Intermediate *x509.Certificate
	// Roots holds Root, for verifying the authority's TLS and its leaves.
	Roots *x509.CertPool
	// RootPEM is Root in PEM form.
	RootPEM []byte
	// Provisioner and Key sign one-time tokens.
	Provisioner string
	Key         *jose.JSONWebKey
	// X5CProvisioner accepts tokens signed with X5CKey and carrying
	// X5CChain, a leaf under a root the provisioner trusts.
	X5CProvisioner string
	X5CChain       []*x509.Certificate
	X5CKey         crypto.Signer

	ca   *ca.CA
	dir  string
	done chan error
}

// Options tune Start.
type Options struct {
	// MaxTLSCertDuration is the provisioner's maximum certificate lifetime
	// (default 24h; step-ca adds its one-minute backdate on top).
	MaxTLSCertDuration time.Duration
}

// Start generates a PKI, starts step-ca on a free loopback port and waits
// until its health endpoint answers (bounded by ctx). Close stops it.
func Start(ctx context.Context, opts Options) (*Authority, error) {
	if opts.MaxTLSCertDuration == 0 {
		opts.MaxTLSCertDuration = 24 * time.Hour
	}
	dir, err := os.MkdirTemp("", "weft-step-ca-")
	if err != nil {
		return nil, fmt.Errorf("smallsteptest: %w", err)
	}
	a, err := start(ctx, dir, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return a, nil
}

func start(ctx context.Context, dir string, opts Options) (*Authority, error) {
	root, rootKey, err := makeCA("Weft Test Step Root", nil, nil, 1)
	if err != nil {
		return nil, err
	}
	inter, interKey, err := makeCA("Weft Test Step Intermediate", root, rootKey, 0)
	if err != nil {
		return nil, err
	}
	rootPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw})
	keyDER, err := x509.MarshalECPrivateKey(interKey)
	if err != nil {
		return nil, fmt.Errorf("smallsteptest: %w", err)
	}
	files := map[string][]byte{
		"root_ca.crt":         rootPEM,
		"intermediate_ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: inter.Raw}),
		"intermediate_ca_key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("smallsteptest: %w", err)
		}
	}

	x5cRoot, x5cRootKey, err := makeCA("Weft Test X5C Root", nil, nil, 0)
	if err != nil {
		return nil, err
	}
	x5cLeaf, x5cKey, err := makeLeaf("weft-identity-service", x5cRoot, x5cRootKey)
	if err != nil {
		return nil, err
	}

	jwk, err := jose.GenerateJWK("EC", "P-256", "ES256", "sig", "", 0)
	if err != nil {
		return nil, fmt.Errorf("smallsteptest: provisioner key: %w", err)
	}
	pub := jwk.Public()

	roots := x509.NewCertPool()
	roots.AddCert(root)

	// ca.CA listens on its configured address itself, so pick a free port
	// and retry on the rare collision.
	var lastErr error
	for try := 0; try < 3; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		claims := &provisioner.Claims{
			MaxTLSDur:     &provisioner.Duration{Duration: opts.MaxTLSCertDuration},
			DefaultTLSDur: &provisioner.Duration{Duration: min(24*time.Hour, opts.MaxTLSCertDuration)},
		}
		cfg := &config.Config{
			Root:             []string{filepath.Join(dir, "root_ca.crt")},
			IntermediateCert: filepath.Join(dir, "intermediate_ca.crt"),
			IntermediateKey:  filepath.Join(dir, "intermediate_ca_key"),
			Address:          addr,
			DNSNames:         []string{"127.0.0.1", "localhost"},
			AuthorityConfig: &config.AuthConfig{
				Provisioners: provisioner.List{
					&provisioner.JWK{Type: "JWK", Name: ProvisionerName, Key: &pub, Claims: claims},
					&provisioner.X5C{Type: "X5C", Name: X5CProvisionerName, Claims: claims,
						Roots: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x5cRoot.Raw})},
				},
			},
		}
		srv, err := ca.New(cfg, ca.WithQuiet(true))
		if err != nil {
			return nil, fmt.Errorf("smallsteptest: step-ca: %w", err)
		}
		a := &Authority{
			URL: "https://" + addr, Root: root, Intermediate: inter, Roots: roots, RootPEM: rootPEM,
			Provisioner: ProvisionerName, Key: jwk, ca: srv, dir: dir, done: make(chan error, 1),
			X5CProvisioner: X5CProvisionerName, X5CChain: []*x509.Certificate{x5cLeaf}, X5CKey: x5cKey,
		}
		go func() { a.done <- srv.Run() }()
		if err := a.waitHealthy(ctx); err != nil {
			_ = srv.Stop()
			<-a.done
			lastErr = err
			if ctx.Err() != nil {
				break
			}
			continue
		}
		return a, nil
	}
	return nil, fmt.Errorf("smallsteptest: step-ca did not start: %w", lastErr)
}

func (a *Authority) waitHealthy(ctx context.Context) error {
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.Roots, MinVersion: tls.VersionTLS12}},
	}
	defer client.CloseIdleConnections()
	for {
		select {
		case err := <-a.done:
			a.done <- err
			return fmt.Errorf("step-ca exited: %w", err)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/health", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops the authority and removes its files.
func (a *Authority) Close() error {
	err := a.ca.Stop()
	<-a.done
	if rmErr := os.RemoveAll(a.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("smallsteptest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// makeLeaf issues a client certificate able to sign X5C tokens.
func makeLeaf(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	return cert, key, nil
}

func makeCA(cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, pathLen int) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("smallsteptest: %w", err)
	}
	return cert, key, nil
}
