package identity

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 5280 method 1 key identifier, not a security use
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// IssueRequest asks an Issuer for a workload certificate. The service
// fills it only after it has authenticated the caller and checked the CSR.
type IssueRequest struct {
	// CSR is the checked request; issuers take its public key and nothing
	// else.
	CSR *x509.CertificateRequest
	// Name is the identity to certify: the certificate's only DNS SAN.
	Name Name
	// NotBefore is the start of validity, already backdated by the clock
	// skew allowance.
	NotBefore time.Time
	// NotAfter is the requested end of validity. An issuer may shorten it
	// (never beyond its own expiry) and reports what it chose in
	// Issued.ValidUntil.
	NotAfter time.Time
}

// Issued is a certificate chain handed back to a workload.
type Issued struct {
	// Leaf is the workload certificate.
	Leaf *x509.Certificate
	// Intermediates lead from Leaf towards a trust anchor, nearest first,
	// anchor excluded.
	Intermediates []*x509.Certificate
	// ValidUntil is Leaf.NotAfter. The Service sets it from the leaf
	// whatever an Issuer put there, so the valid_until a proxy schedules
	// its renewal by can never outlive the certificate.
	ValidUntil time.Time
}

// Issuer signs workload certificates. Implementations: *CA (a key pair in
// memory), localca.Issuer (a key pair from files), kubernetes.SecretIssuer
// (the same, from a Secret), smallstep.Issuer (a step-ca authority).
//
// The contract the Service relies on, which every implementation keeps:
//
//   - Concurrency: Issue is called from many goroutines at once (one per
//     Certify call in flight) and must be safe for that.
//   - Context: ctx is the Certify caller's, so the proxy's gRPC deadline
//     and its cancellation reach Issue. An issuer that waits on anything
//     (a remote authority, a lock, a token) gives up when ctx is done and
//     returns an error.
//   - Errors, and the gRPC code the caller gets (see Code): an error
//     wrapping ErrInvalidCSR means this request can never be signed (a key
//     type or size the authority refuses) and is answered InvalidArgument;
//     an error wrapping ErrUnavailable means the issuer cannot sign now (an
//     authority down or timing out, an expired issuer certificate) and is
//     answered Unavailable, as is any other error, including ctx's own:
//     the service fails closed and the proxy retries.
//   - Result: a leaf for req.Name only (its one DNS SAN), for req.CSR's
//     public key, not a CA, valid now, with the intermediates that lead to
//     a trust anchor. NotAfter may be earlier than req.NotAfter (never
//     later than the issuer's own expiry). The Service checks the leaf
//     against all of this and answers Unavailable rather than hand out a
//     certificate that breaks it; it sets ValidUntil from the leaf.
//   - Nothing from the CSR but its public key is trusted: the request was
//     authenticated and checked before Issue is called (IssueRequest).
type Issuer interface {
	Issue(ctx context.Context, req IssueRequest) (*Issued, error)
}

// ExpiryReporter is an optional capability of an Issuer: the NotAfter of
// the certificate it signs with, exported as a metric by the service.
type ExpiryReporter interface {
	Expiry() time.Time
}

// CA is the in-memory Issuer: an issuer certificate and its private key,
// plus the intermediates between it and a trust anchor. It is immutable
// and safe for concurrent use.
type CA struct {
	cert  *x509.Certificate
	key   crypto.Signer
	chain []*x509.Certificate
}

// NewCA checks that cert is a CA certificate that may sign certificates,
// that key is its private key, and that it is valid now; chain holds the
// certificates above cert up to (not including) the trust anchor. When
// bundle is not nil, cert must also chain to it. Options: WithClock.
func NewCA(cert *x509.Certificate, key crypto.Signer, chain []*x509.Certificate, bundle *Bundle, opts ...Option) (*CA, error) {
	cfg := newConfig(opts)
	if err := CheckIssuer(cert, key, chain, bundle, cfg.now()); err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, chain: append([]*x509.Certificate(nil), chain...)}, nil
}

// CheckIssuer is the pure check behind NewCA: cert must be a CA with the
// keyCertSign usage, valid at now, matching key, and (when bundle is not
// nil) chain to the bundle through chain.
func CheckIssuer(cert *x509.Certificate, key crypto.Signer, chain []*x509.Certificate, bundle *Bundle, now time.Time) error {
	if cert == nil || key == nil {
		return errors.New("identity: issuer: certificate and key are required")
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return fmt.Errorf("identity: issuer certificate %q is not a CA (basicConstraints cA=false)", cert.Subject)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("identity: issuer certificate %q lacks the keyCertSign key usage", cert.Subject)
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("identity: issuer certificate %q expired at %s", cert.Subject, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("identity: issuer certificate %q is not valid before %s", cert.Subject, cert.NotBefore.UTC().Format(time.RFC3339))
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("identity: issuer key: %w", err)
	}
	if !bytes.Equal(pub, cert.RawSubjectPublicKeyInfo) {
		return fmt.Errorf("identity: issuer key does not match the issuer certificate %q", cert.Subject)
	}
	if bundle != nil {
		if _, err := bundle.Verify(cert, chain, now); err != nil {
			return fmt.Errorf("identity: issuer certificate %q does not chain to the trust anchors: %w", cert.Subject, err)
		}
	}
	return nil
}

// Certificate returns the issuer certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Expiry returns the issuer certificate's NotAfter.
func (ca *CA) Expiry() time.Time { return ca.cert.NotAfter }

// Issue signs a leaf for req.Name with req.CSR's public key, using the
// template of LeafTemplate. NotAfter is capped at the issuer's own expiry.
func (ca *CA) Issue(_ context.Context, req IssueRequest) (*Issued, error) {
	if req.CSR == nil {
		return nil, fmt.Errorf("identity: issue: no CSR: %w", ErrInvalidCSR)
	}
	tmpl, err := LeafTemplate(req)
	if err != nil {
		return nil, err
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.CSR.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("identity: issue %s: %w", req.Name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("identity: issue %s: %w", req.Name, err)
	}
	inter := make([]*x509.Certificate, 0, 1+len(ca.chain))
	inter = append(inter, ca.cert)
	inter = append(inter, ca.chain...)
	return &Issued{Leaf: leaf, Intermediates: inter, ValidUntil: leaf.NotAfter}, nil
}

// maxCommonName is the RFC 5280 upper bound of a common name.
const maxCommonName = 64

// LeafTemplate builds the certificate template for a workload leaf. It is
// a pure function of req (plus a random serial): CA:false, key usage
// digitalSignature, extended key usages serverAuth and clientAuth, the
// identity as the only DNS SAN, and as the common name when it fits in 64
// characters (otherwise the subject is empty and the SAN extension is
// marked critical, as RFC 5280 requires). Nothing from the CSR but its
// public key is used.
func LeafTemplate(req IssueRequest) (*x509.Certificate, error) {
	if err := req.Name.Validate(); err != nil {
		return nil, err
	}
	if !req.NotAfter.After(req.NotBefore) {
		return nil, fmt.Errorf("identity: issue %s: NotAfter %s is not after NotBefore %s", req.Name, req.NotAfter, req.NotBefore)
	}
	if req.CSR == nil || req.CSR.PublicKey == nil {
		return nil, fmt.Errorf("identity: issue %s: no public key: %w", req.Name, ErrInvalidCSR)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	ski, err := keyID(req.CSR.PublicKey)
	if err != nil {
		return nil, err
	}
	name := req.Name.String()
	var subject pkix.Name
	if len(name) <= maxCommonName {
		subject.CommonName = name
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               subject,
		NotBefore:             req.NotBefore.UTC().Truncate(time.Second),
		NotAfter:              req.NotAfter.UTC().Truncate(time.Second),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              []string{name},
		SubjectKeyId:          ski,
	}, nil
}

// randomSerial returns a positive serial of at most 128 bits, well under
// the 20 octets RFC 5280 allows.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("identity: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// keyID computes a subject key identifier: the SHA-1 of the subject public
// key bits (RFC 5280 4.2.1.2, method 1).
func keyID(pub any) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("identity: public key: %w: %w", ErrInvalidCSR, err)
	}
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("identity: public key: %w", err)
	}
	sum := sha1.Sum(spki.PublicKey.Bytes) //nolint:gosec // see import
	return sum[:], nil
}
