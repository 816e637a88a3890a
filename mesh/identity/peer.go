package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"
)

// MaxPeerChain bounds the number of certificates a peer may present.
const MaxPeerChain = 8

// ErrPeerRejected is wrapped by every VerifyPeer refusal.
var ErrPeerRejected = errors.New("peer certificate rejected")

// VerifyPeer checks the certificates a TLS peer presented (leaf first, DER)
// and returns the identity they prove. It is what the mesh's TLS hooks call
// and is a pure function of its arguments. The leaf must:
//
//   - chain to a root of bundle at time now, for the extended key usage
//     usage (serverAuth for servers, clientAuth for clients), which also
//     enforces EKU limits of intermediates;
//   - not be a CA nor carry keyCertSign or cRLSign;
//   - carry exactly one DNS SAN, parsable as a Name, and no URI, IP or
//     email SANs (names are matched by type; the common name is ignored).
func VerifyPeer(bundle *Bundle, rawCerts [][]byte, now time.Time, usage x509.ExtKeyUsage) (Name, error) {
	if bundle == nil {
		return Name{}, fmt.Errorf("identity: no trust bundle: %w", ErrPeerRejected)
	}
	if len(rawCerts) == 0 {
		return Name{}, fmt.Errorf("identity: peer presented no certificate: %w", ErrPeerRejected)
	}
	if len(rawCerts) > MaxPeerChain {
		return Name{}, fmt.Errorf("identity: peer presented %d certificates, more than %d: %w", len(rawCerts), MaxPeerChain, ErrPeerRejected)
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return Name{}, fmt.Errorf("identity: peer certificate %d: %w: %w", i, ErrPeerRejected, err)
		}
		certs[i] = c
	}
	leaf := certs[0]
	if leaf.IsCA || leaf.KeyUsage&(x509.KeyUsageCertSign|x509.KeyUsageCRLSign) != 0 {
		return Name{}, fmt.Errorf("identity: peer leaf %q is a CA or may sign certificates: %w", leaf.Subject, ErrPeerRejected)
	}
	if len(leaf.URIs)+len(leaf.IPAddresses)+len(leaf.EmailAddresses) != 0 {
		return Name{}, fmt.Errorf("identity: peer leaf carries URI, IP or email SANs: %w", ErrPeerRejected)
	}
	if len(leaf.DNSNames) != 1 {
		return Name{}, fmt.Errorf("identity: peer leaf has %d DNS SANs, want exactly one: %w", len(leaf.DNSNames), ErrPeerRejected)
	}
	name, err := ParseName(leaf.DNSNames[0])
	if err != nil {
		return Name{}, fmt.Errorf("identity: peer leaf SAN: %w: %w", ErrPeerRejected, err)
	}
	if _, err := bundle.Verify(leaf, certs[1:], now, usage); err != nil {
		return Name{}, fmt.Errorf("%w: %w", ErrPeerRejected, err)
	}
	return name, nil
}
