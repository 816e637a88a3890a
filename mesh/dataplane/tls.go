package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/identity"
)

// ErrPeerIdentity is wrapped when a peer's certificate is not acceptable.
// It is identity.ErrPeerRejected: the data plane applies the mesh's one
// rule, identity.VerifyPeerChain, and adds only the check that a server
// is the identity the client asked for.
var ErrPeerIdentity = identity.ErrPeerRejected

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
			_, err := identity.VerifyPeerChain(id.Roots(), cs.PeerCertificates, now(), x509.ExtKeyUsageClientAuth)
			if err != nil {
				return fmt.Errorf("dataplane: client certificate: %w", err)
			}
			return nil
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
			got, err := identity.VerifyPeerChain(id.Roots(), cs.PeerCertificates, now(), x509.ExtKeyUsageServerAuth)
			if err != nil {
				return fmt.Errorf("dataplane: server certificate: %w", err)
			}
			// The verified name is canonical (lower case); a hint may
			// spell the same DNS name in another case.
			if got := got.String(); !strings.EqualFold(got, serverID) {
				return fmt.Errorf("dataplane: server presented %q, want %q: %w", got, serverID, ErrPeerIdentity)
			}
			return nil
		},
	}
}

// PeerIdentity returns the verified identity of a mesh TLS peer, or "" when
// the peer sent no certificate. It must only be called after a handshake
// made with ServerTLSConfig or ClientTLSConfig, whose verification
// (identity.VerifyPeerChain) ensures the leaf carries exactly one DNS SAN,
// an identity name in its canonical lower-case form.
func PeerIdentity(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 || len(cs.PeerCertificates[0].DNSNames) != 1 {
		return ""
	}
	return cs.PeerCertificates[0].DNSNames[0]
}

// tapServerTLS is the tap listener's TLS: the proxy's certificate, a
// client certificate required and verified against the mesh roots.
func tapServerTLS(id Identity, now func() time.Time) *tls.Config {
	c := ServerTLSConfig(id, now)
	c.NextProtos = []string{"h2"}
	c.ClientAuth = tls.RequireAnyClientCert // verified in VerifyConnection, against the current roots
	return c
}
