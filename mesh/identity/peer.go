package identity

import (
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"time"
)

// MaxPeerChain bounds the number of certificates a peer may present.
const MaxPeerChain = 8

// ErrPeerRejected is wrapped by every VerifyPeer and VerifyPeerChain
// refusal.
var ErrPeerRejected = errors.New("peer certificate rejected")

// VerifyPeer checks the certificates a TLS peer presented (leaf first, DER)
// and returns the identity they prove. It parses them and applies
// VerifyPeerChain's rule against bundle; use it where only the raw
// certificates are at hand (tls.Config.VerifyPeerCertificate).
func VerifyPeer(bundle *Bundle, rawCerts [][]byte, now time.Time, usage x509.ExtKeyUsage) (Name, error) {
	if bundle == nil {
		return Name{}, fmt.Errorf("identity: no trust bundle: %w", ErrPeerRejected)
	}
	// The count is checked before anything is parsed, so a peer cannot
	// make us parse thousands of certificates.
	if err := checkPeerCount(len(rawCerts)); err != nil {
		return Name{}, err
	}
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return Name{}, fmt.Errorf("identity: peer certificate %d: %w: %w", i, ErrPeerRejected, err)
		}
		certs[i] = c
	}
	return VerifyPeerChain(bundle.pool, certs, now, usage)
}

// VerifyPeerChain is the mesh's one rule for a peer's certificates: the
// identity TLS hooks (mesh/identity/client) and the data plane's mesh TLS
// (mesh/dataplane) both apply it, on every handshake. chain is what the
// peer presented, leaf first, as crypto/tls has already parsed it
// (tls.ConnectionState.PeerCertificates). It is a pure function of its
// arguments and returns the identity the leaf proves. The chain must:
//
//   - hold between 1 and MaxPeerChain certificates;
//   - lead from the leaf to one of roots at time now (both ends of every
//     certificate's validity included), through the other certificates
//     given, for the extended key usage usage (serverAuth for a server,
//     clientAuth for a client), which also enforces the EKU limits of the
//     intermediates.
//
// The leaf must:
//
//   - not be a CA nor carry the keyCertSign or cRLSign key usage;
//   - list usage among its extended key usages: a leaf without the
//     extension, or with only anyExtendedKeyUsage, is refused, although
//     crypto/x509 would accept it for any usage;
//   - carry exactly one DNS SAN, in the canonical lower-case form ParseName
//     accepts (<sa>.<ns>.serviceaccount.identity.<cp-ns>.<trust-domain>),
//     and no URI, IP or email SAN. A SPIFFE ID in a URI SAN, even one
//     naming the same workload, is refused: a certificate proves one name,
//     so that no two readers of it (this rule, an authorization check, a
//     Linkerd proxy that takes the first DNS or URI SAN) can see two
//     identities in it. The mesh's CAs never issue one (CheckCSR refuses
//     the request). The common name is ignored.
//
// Every refusal wraps ErrPeerRejected.
func VerifyPeerChain(roots *x509.CertPool, chain []*x509.Certificate, now time.Time, usage x509.ExtKeyUsage) (Name, error) {
	if roots == nil {
		return Name{}, fmt.Errorf("identity: no trust roots: %w", ErrPeerRejected)
	}
	if err := checkPeerCount(len(chain)); err != nil {
		return Name{}, err
	}
	leaf := chain[0]
	if leaf == nil {
		return Name{}, fmt.Errorf("identity: peer leaf is missing: %w", ErrPeerRejected)
	}
	if leaf.IsCA || leaf.KeyUsage&(x509.KeyUsageCertSign|x509.KeyUsageCRLSign) != 0 {
		return Name{}, fmt.Errorf("identity: peer leaf %q is a CA or may sign certificates: %w", leaf.Subject, ErrPeerRejected)
	}
	if !slices.Contains(leaf.ExtKeyUsage, usage) { // listed explicitly: anyEKU or no EKU does not count
		return Name{}, fmt.Errorf("identity: peer leaf lacks the %s extended key usage: %w", usageName(usage), ErrPeerRejected)
	}
	if n := len(leaf.URIs) + len(leaf.IPAddresses) + len(leaf.EmailAddresses); n != 0 {
		return Name{}, fmt.Errorf("identity: peer leaf carries %d URI, IP or email SANs, want none: %w", n, ErrPeerRejected)
	}
	if len(leaf.DNSNames) != 1 {
		return Name{}, fmt.Errorf("identity: peer leaf has %d DNS SANs, want exactly one: %w", len(leaf.DNSNames), ErrPeerRejected)
	}
	name, err := ParseName(leaf.DNSNames[0])
	if err != nil {
		return Name{}, fmt.Errorf("identity: peer leaf SAN: %w: %w", ErrPeerRejected, err)
	}
	inter := x509.NewCertPool()
	for i, c := range chain[1:] {
		if c == nil {
			return Name{}, fmt.Errorf("identity: peer certificate %d is missing: %w", i+1, ErrPeerRejected)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}); err != nil {
		return Name{}, fmt.Errorf("identity: verify peer %s: %w: %w", name, ErrPeerRejected, err)
	}
	return name, nil
}

func checkPeerCount(n int) error {
	switch {
	case n == 0:
		return fmt.Errorf("identity: peer presented no certificate: %w", ErrPeerRejected)
	case n > MaxPeerChain:
		return fmt.Errorf("identity: peer presented %d certificates, more than %d: %w", n, MaxPeerChain, ErrPeerRejected)
	}
	return nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprintf("#%d", u)
}
