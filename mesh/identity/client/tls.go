package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"google.golang.org/grpc/credentials"

	"github.com/weftmesh/weft/mesh/identity"
)

// Authorizer decides whether a verified peer identity may connect. A nil
// Authorizer admits every identity of the mesh's domain.
type Authorizer func(peer identity.Name) error

// ServerTLSConfig returns a TLS 1.3-only server configuration for mesh
// traffic: it presents the current certificate (renewals are picked up on
// the next handshake), requires a client certificate, and verifies it with
// identity.VerifyPeer against the current bundle for clientAuth. The peer
// must belong to this client's domain and pass authorize, when given.
// Session tickets are off, so a handshake is never resumed past a change
// of bundle. Set NextProtos on the result as needed.
func (c *Client) ServerTLSConfig(authorize Authorizer) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		ClientAuth:             tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			peer, err := c.verify(cs, x509.ExtKeyUsageClientAuth)
			if err != nil {
				return err
			}
			if peer.Domain != c.cfg.Name.Domain {
				return fmt.Errorf("client: peer %s is outside this mesh's domain: %w", peer, identity.ErrPeerRejected)
			}
			if authorize != nil {
				if err := authorize(peer); err != nil {
					return fmt.Errorf("client: peer %s not authorized: %w", peer, err)
				}
			}
			return nil
		},
	}
}

// ClientTLSConfig returns a TLS 1.3-only client configuration that
// presents the current certificate and accepts only a server proving
// expected (the identity discovery gave for the endpoint), verified with
// identity.VerifyPeer against the current bundle for serverAuth. The SNI
// is the expected name, as Linkerd's proxy sends it.
func (c *Client) ClientTLSConfig(expected identity.Name) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: true,
		ServerName:             expected.String(),
		// The standard verification checks hostnames the mesh does not
		// use; VerifyConnection below does the whole check instead, and
		// runs on every handshake.
		InsecureSkipVerify: true, //nolint:gosec // replaced by VerifyConnection
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.Certificate()
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			peer, err := c.verify(cs, x509.ExtKeyUsageServerAuth)
			if err != nil {
				return err
			}
			if peer != expected {
				return fmt.Errorf("client: server is %s, want %s: %w", peer, expected, identity.ErrPeerRejected)
			}
			return nil
		},
	}
}

func (c *Client) verify(cs tls.ConnectionState, usage x509.ExtKeyUsage) (identity.Name, error) {
	if cs.Version != tls.VersionTLS13 {
		return identity.Name{}, errors.New("client: mesh TLS requires TLS 1.3")
	}
	raw := make([][]byte, len(cs.PeerCertificates))
	for i, pc := range cs.PeerCertificates {
		raw[i] = pc.Raw
	}
	return identity.VerifyPeer(c.cfg.Bundle.Bundle(), raw, c.opts.clock.Now(), usage)
}

// PeerName returns the identity of a peer whose handshake was verified by
// a configuration from this package. It reads the verified leaf's DNS SAN;
// do not use it on connections verified otherwise.
func PeerName(cs tls.ConnectionState) (identity.Name, error) {
	if len(cs.PeerCertificates) == 0 || len(cs.PeerCertificates[0].DNSNames) != 1 {
		return identity.Name{}, errors.New("client: no verified peer identity")
	}
	return identity.ParseName(cs.PeerCertificates[0].DNSNames[0])
}

// ServerCredentials returns gRPC server transport credentials over
// ServerTLSConfig(authorize).
func (c *Client) ServerCredentials(authorize Authorizer) credentials.TransportCredentials {
	return credentials.NewTLS(c.ServerTLSConfig(authorize))
}

// ClientCredentials returns gRPC client transport credentials over
// ClientTLSConfig(expected).
func (c *Client) ClientCredentials(expected identity.Name) credentials.TransportCredentials {
	return credentials.NewTLS(c.ClientTLSConfig(expected))
}
