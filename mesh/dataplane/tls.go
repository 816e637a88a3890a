package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// maxPeerChain bounds the certificates a peer may present.
const maxPeerChain = 8

// ErrPeerIdentity is wrapped when a peer's certificate is not acceptable.
var ErrPeerIdentity = errors.New("dataplane: peer certificate rejected")

// ServerTLSConfig returns the inbound side of mesh TLS: TLS 1.3 only, the
// certificate from id at each handshake, client certificates requested and,
// when sent, verified against id's current roots for client authentication.
// No session resumption. The client's identity is read afterwards with
// PeerIdentity.
func ServerTLSConfig(id Identity, now func() time.Time) *tls.Config {
	if now == nil {
		now = time.Now
	}
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		NextProtos:             []string{transport.ALPN},
		ClientAuth:             tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // mesh TLS without a client identity; policy decides
			}
			_, err := VerifyPeer(id.Roots(), cs.PeerCertificates, x509.ExtKeyUsageClientAuth, now())
			return err
		},
	}
}

// ClientTLSConfig returns the outbound side of mesh TLS towards a server
// that must present exactly the identity serverID: TLS 1.3 only, SNI set to
// serverID, the client certificate from id, the server's chain verified
// against id's current roots for server authentication, no resumption.
func ClientTLSConfig(id Identity, serverID string, now func() time.Time) *tls.Config {
	if now == nil {
		now = time.Now
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		MaxVersion: tls.VersionTLS13,
		ServerName: serverID,
		NextProtos: []string{transport.ALPN},
		// Go's own verification would accept any DNS SAN that matches,
		// wildcards included, against roots fixed at config time; the mesh
		// needs one exact identity against the current roots, so it is done
		// in VerifyConnection.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			got, err := VerifyPeer(id.Roots(), cs.PeerCertificates, x509.ExtKeyUsageServerAuth, now())
			if err != nil {
				return err
			}
			if !strings.EqualFold(got, serverID) {
				return fmt.Errorf("%w: server presented %q, want %q", ErrPeerIdentity, got, serverID)
			}
			return nil
		},
	}
}

// VerifyPeer verifies a peer's chain against roots at time now for the given
// usage and returns the identity it proves: the single DNS SAN of the leaf.
// The leaf must not be a CA or able to sign certificates or CRLs, must list
// the usage explicitly, and must carry exactly one DNS SAN and at most one
// URI SAN; the common name is never used.
func VerifyPeer(roots *x509.CertPool, chain []*x509.Certificate, usage x509.ExtKeyUsage, now time.Time) (string, error) {
	if len(chain) == 0 {
		return "", fmt.Errorf("%w: no certificate", ErrPeerIdentity)
	}
	if len(chain) > maxPeerChain {
		return "", fmt.Errorf("%w: chain of %d certificates, at most %d", ErrPeerIdentity, len(chain), maxPeerChain)
	}
	if roots == nil {
		return "", fmt.Errorf("%w: no trust roots", ErrPeerIdentity)
	}
	leaf := chain[0]
	if leaf.IsCA || leaf.KeyUsage&(x509.KeyUsageCertSign|x509.KeyUsageCRLSign) != 0 {
		return "", fmt.Errorf("%w: leaf can sign certificates", ErrPeerIdentity)
	}
	hasUsage := false
	for _, u := range leaf.ExtKeyUsage {
		hasUsage = hasUsage || u == usage
	}
	if !hasUsage {
		return "", fmt.Errorf("%w: leaf lacks the %s extended key usage", ErrPeerIdentity, usageName(usage))
	}
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] == "" {
		return "", fmt.Errorf("%w: leaf has %d DNS names, want exactly one", ErrPeerIdentity, len(leaf.DNSNames))
	}
	if len(leaf.URIs) > 1 {
		return "", fmt.Errorf("%w: leaf has %d URI SANs", ErrPeerIdentity, len(leaf.URIs))
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	}); err != nil {
		return "", fmt.Errorf("%w: %w", ErrPeerIdentity, err)
	}
	return strings.ToLower(leaf.DNSNames[0]), nil
}

func usageName(u x509.ExtKeyUsage) string {
	switch u {
	case x509.ExtKeyUsageServerAuth:
		return "serverAuth"
	case x509.ExtKeyUsageClientAuth:
		return "clientAuth"
	}
	return fmt.Sprint(u)
}

// PeerIdentity returns the verified identity of a mesh TLS peer, or "" when
// the peer sent no certificate. It must only be called after a handshake
// made with ServerTLSConfig or ClientTLSConfig, whose verification ensures
// the leaf carries exactly one DNS SAN.
func PeerIdentity(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 || len(cs.PeerCertificates[0].DNSNames) != 1 {
		return ""
	}
	return strings.ToLower(cs.PeerCertificates[0].DNSNames[0])
}
