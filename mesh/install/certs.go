package install

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// ExpiryWarning is how close to expiry a certificate must be before the
// install (and `weft check`) warns about it.
const ExpiryWarning = pki.ExpiryWarning

// WebhookCertLifetime is the lifetime of a generated webhook CA and serving
// certificate. Re-running the install with generated certificates replaces
// them.
const WebhookCertLifetime = 365 * 24 * time.Hour

// Identity is the identity material of an install: the trust anchors every
// proxy trusts and the issuer the identity service signs with.
type Identity struct {
	// TrustAnchorsPEM holds one or more CA certificates.
	TrustAnchorsPEM []byte
	// IssuerCertPEM is the issuer certificate, optionally followed by the
	// intermediates between it and an anchor; IssuerKeyPEM its private key.
	IssuerCertPEM []byte
	IssuerKeyPEM  []byte
}

// Webhook is the HTTPS material of the admission webhooks: the CA that goes
// into the webhook configurations' caBundle and the injector's serving
// certificate and key, valid for [InjectorServerName].
type Webhook struct {
	CAPEM   []byte
	CertPEM []byte
	KeyPEM  []byte
}

// Certificates are all the certificates an install carries.
type Certificates struct {
	Identity Identity
	Webhook  Webhook
	// Tap is the tap API's serving certificate (valid for
	// [TapServerName]) with its CA, which goes into the APIService's
	// caBundle. Without it the tap API is not installed, and Render warns.
	Tap Webhook
}

// GenerateIdentity makes a fresh trust anchor and an issuer under it, both
// valid for a year from now. The anchor's private key is returned apart:
// the install never writes it to the cluster, and without it no new issuer
// can be made under the same anchor.
func GenerateIdentity(now time.Time) (id Identity, anchorKeyPEM []byte, err error) {
	anchor, err := pki.NewAnchor(pki.Options{Now: now})
	if err != nil {
		return Identity{}, nil, fmt.Errorf("install: %w", err)
	}
	issuer, err := pki.NewIssuer(anchor, pki.Options{Now: now})
	if err != nil {
		return Identity{}, nil, fmt.Errorf("install: %w", err)
	}
	return Identity{TrustAnchorsPEM: anchor.CertPEM, IssuerCertPEM: issuer.CertPEM, IssuerKeyPEM: issuer.KeyPEM}, anchor.KeyPEM, nil
}

// GenerateWebhook makes a CA and a serving certificate under it for the
// injector Service in namespace (DNS names <svc>.<ns>.svc and
// <svc>.<ns>.svc.<clusterDomain>), both valid for [WebhookCertLifetime].
// The CA's key is discarded.
func GenerateWebhook(namespace, clusterDomain string, now time.Time) (Webhook, error) {
	return generateServing("webhook", "weft-proxy-injector CA", InjectorServerName(namespace), clusterDomain, now)
}

// GenerateTap makes a CA and a serving certificate under it for the tap
// API's Service in namespace ([TapServerName], and with the cluster
// domain), both valid for [WebhookCertLifetime]: the API server verifies
// the tap API against the CA (the APIService's caBundle). The CA's key is
// discarded.
func GenerateTap(namespace, clusterDomain string, now time.Time) (Webhook, error) {
	return generateServing("tap", "weft-tap CA", TapServerName(namespace), clusterDomain, now)
}

// generateServing makes a CA named caName and a serving certificate for
// name (and name.clusterDomain) under it.
func generateServing(what, caName, name, clusterDomain string, now time.Time) (Webhook, error) {
	ca, err := pki.NewAnchor(pki.Options{CommonName: caName, Lifetime: WebhookCertLifetime, Now: now})
	if err != nil {
		return Webhook{}, fmt.Errorf("install: %s CA: %w", what, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Webhook{}, fmt.Errorf("install: %s key: %w", what, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Webhook{}, fmt.Errorf("install: %s serial: %w", what, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name, name + "." + clusterDomain},
		NotBefore:             now.Add(-time.Minute).UTC().Truncate(time.Second),
		NotAfter:              ca.Cert.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return Webhook{}, fmt.Errorf("install: %s certificate: %w", what, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Webhook{}, fmt.Errorf("install: %s key: %w", what, err)
	}
	return Webhook{
		CAPEM:   ca.CertPEM,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// issuerLayouts are the files of an issuer directory, in Linkerd's two
// layouts.
var issuerLayouts = []struct{ scheme, cert, key string }{
	{vocab.IssuerSchemeLinkerd, vocab.IssuerCertLinkerd, vocab.IssuerKeyLinkerd},
	{vocab.IssuerSchemeKubernetes, vocab.IssuerCertKubernetes, vocab.IssuerKeyKubernetes},
}

// Files of a webhook certificate directory ([LoadWebhook]).
const (
	WebhookCAFile   = "ca.crt"
	WebhookCertFile = "tls.crt"
	WebhookKeyFile  = "tls.key"
)

// LoadIdentity reads the trust anchors from anchorsFile and the issuer from
// issuerDir (see [LoadIssuer]). It only reads: [Render] checks what was
// read.
func LoadIdentity(anchorsFile, issuerDir string) (Identity, error) {
	anchors, err := os.ReadFile(anchorsFile)
	if err != nil {
		return Identity{}, fmt.Errorf("install: trust anchors: %w", err)
	}
	certPEM, keyPEM, err := LoadIssuer(issuerDir)
	if err != nil {
		return Identity{}, err
	}
	return Identity{TrustAnchorsPEM: anchors, IssuerCertPEM: certPEM, IssuerKeyPEM: keyPEM}, nil
}

// LoadIssuer reads an issuer directory holding crt.pem and key.pem
// (linkerd.io/tls, what `weft certs create-issuer` writes) or tls.crt and
// tls.key (kubernetes.io/tls).
func LoadIssuer(dir string) (certPEM, keyPEM []byte, err error) {
	for _, l := range issuerLayouts {
		crt, key := filepath.Join(dir, l.cert), filepath.Join(dir, l.key)
		if !exists(crt) && !exists(key) {
			continue
		}
		if certPEM, err = os.ReadFile(crt); err != nil {
			return nil, nil, fmt.Errorf("install: issuer (%s layout): %w", l.scheme, err)
		}
		if keyPEM, err = os.ReadFile(key); err != nil {
			return nil, nil, fmt.Errorf("install: issuer (%s layout): %w", l.scheme, err)
		}
		return certPEM, keyPEM, nil
	}
	return nil, nil, fmt.Errorf("install: issuer directory %s holds neither crt.pem and key.pem nor tls.crt and tls.key", dir)
}

// LoadWebhook reads ca.crt, tls.crt and tls.key from dir.
func LoadWebhook(dir string) (Webhook, error) {
	var w Webhook
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{WebhookCAFile, &w.CAPEM}, {WebhookCertFile, &w.CertPEM}, {WebhookKeyFile, &w.KeyPEM}} {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return Webhook{}, fmt.Errorf("install: webhook certificates: %w", err)
		}
		*f.dst = data
	}
	return w, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkIdentity validates the identity material at now and returns
// warnings for certificates close to expiry.
func checkIdentity(id Identity, now time.Time) (warnings []string, err error) {
	anchors, err := certpem.ParseCertificates(id.TrustAnchorsPEM)
	if err != nil {
		return nil, fmt.Errorf("install: trust anchors: %w", err)
	}
	roots := x509.NewCertPool()
	for i, a := range anchors {
		if !a.IsCA {
			return nil, fmt.Errorf("install: trust anchors: certificate %d (%s) is not a CA", i+1, a.Subject)
		}
		if err := validAt(a, now); err != nil {
			return nil, fmt.Errorf("install: trust anchors: certificate %d (%s): %w", i+1, a.Subject, err)
		}
		if w := expiryWarning("trust anchor "+a.Subject.String(), a, now); w != "" {
			warnings = append(warnings, w)
		}
		roots.AddCert(a)
	}
	issuer, chain, _, err := certpem.ParseKeyPair(id.IssuerCertPEM, id.IssuerKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("install: identity issuer: %w", err)
	}
	if !issuer.IsCA {
		return nil, fmt.Errorf("install: identity issuer %s is not a CA", issuer.Subject)
	}
	if err := validAt(issuer, now); err != nil {
		return nil, fmt.Errorf("install: identity issuer %s: %w", issuer.Subject, err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain {
		inter.AddCert(c)
	}
	if _, err := issuer.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("install: identity issuer %s does not chain to the trust anchors: %w", issuer.Subject, err)
	}
	if w := expiryWarning("identity issuer "+issuer.Subject.String(), issuer, now); w != "" {
		warnings = append(warnings, w)
	}
	return warnings, nil
}

// checkWebhook validates the webhook material for the injector Service in
// namespace.
func checkWebhook(w Webhook, namespace string, now time.Time) (warnings []string, err error) {
	return checkServing("webhook", w, InjectorServerName(namespace), now)
}

// checkServing validates serving material (what: "webhook", "tap") for
// the DNS name name.
func checkServing(what string, w Webhook, name string, now time.Time) (warnings []string, err error) {
	cas, err := certpem.ParseCertificates(w.CAPEM)
	if err != nil {
		return nil, fmt.Errorf("install: %s CA: %w", what, err)
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	leaf, chain, _, err := certpem.ParseKeyPair(w.CertPEM, w.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("install: %s serving certificate: %w", what, err)
	}
	if err := validAt(leaf, now); err != nil {
		return nil, fmt.Errorf("install: %s serving certificate %s: %w", what, leaf.Subject, err)
	}
	inter := x509.NewCertPool()
	for _, c := range chain {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("install: %s serving certificate is not valid for %s under the %s CA: %w", what, name, what, err)
	}
	if w := expiryWarning(what+" serving certificate", leaf, now); w != "" {
		warnings = append(warnings, w)
	}
	return warnings, nil
}

func validAt(c *x509.Certificate, now time.Time) error {
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

func expiryWarning(what string, c *x509.Certificate, now time.Time) string {
	if left := c.NotAfter.Sub(now); left < ExpiryWarning {
		return fmt.Sprintf("%s expires in %s (at %s), less than 30 days from now", what, left.Round(time.Hour), c.NotAfter.UTC().Format(time.RFC3339))
	}
	return ""
}
