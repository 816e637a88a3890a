package control

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/weftmesh/weft/mesh/identity/client"
)

// Identity is a dataplane.Identity over the identity client: the
// certificate the client holds (renewed in the background) and the trust
// bundle it verifies against.
type Identity struct {
	c *client.Client
}

// NewIdentity wraps an identity client. The caller keeps owning c and
// closes it.
func NewIdentity(c *client.Client) (*Identity, error) {
	if c == nil {
		return nil, fmt.Errorf("control: identity client is nil")
	}
	return &Identity{c: c}, nil
}

// Name returns the workload's identity name.
func (i *Identity) Name() string { return i.c.Name().String() }

// Certificate returns the current certificate with its Leaf parsed.
func (i *Identity) Certificate() (*tls.Certificate, error) {
	cert, err := i.c.Certificate()
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("control: parsing certificate: %w", err)
		}
		c := *cert
		c.Leaf = leaf
		cert = &c
	}
	return cert, nil
}

// Roots returns the current trust bundle as a pool.
func (i *Identity) Roots() *x509.CertPool { return i.c.Bundle().Pool() }

// Client returns the wrapped identity client.
func (i *Identity) Client() *client.Client { return i.c }
