package testutil

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// PeerChains is the one table of peer certificate chains that every mesh
// TLS verifier is driven with (identity.VerifyPeer and VerifyPeerChain,
// the data plane's ServerTLSConfig and ClientTLSConfig): a good chain and
// the chains the mesh's rule must refuse, all issued at run time under
// Anchor (through Issuer) unless the case is about another root.
type PeerChains struct {
	Anchor *CA
	Issuer *CA
	// Name is the identity every chain claims (as DNS SAN, URI SAN or
	// common name), in its canonical text form.
	Name string
	// Good is a leaf for Name with both serverAuth and clientAuth, and
	// its intermediate: every verifier accepts it for either usage.
	Good PeerChain
	// Refused are the chains every verifier must refuse.
	Refused []PeerChain
}

// PeerChain is what one peer presents.
type PeerChain struct {
	// Case names what is wrong with the chain.
	Case string
	// Certs is the chain, leaf first; Key is the leaf's private key.
	Certs []*x509.Certificate
	Key   crypto.Signer
	// Usages lists the extended key usages the chain is refused for: a
	// peer presenting it as a client (clientAuth), as a server
	// (serverAuth), or both.
	Usages []x509.ExtKeyUsage
	// NotOverTLS, when set, says why the case cannot be replayed in a
	// real handshake (the refusal is then checked on the function only).
	NotOverTLS string
}

// Raw returns the chain in DER, as crypto/tls hands it to
// VerifyPeerCertificate.
func (c PeerChain) Raw() [][]byte {
	out := make([][]byte, len(c.Certs))
	for i, cert := range c.Certs {
		out[i] = cert.Raw
	}
	return out
}

// TLS returns the chain and key ready for tls.Config.Certificates.
func (c PeerChain) TLS() tls.Certificate {
	cert := tls.Certificate{Certificate: c.Raw(), PrivateKey: c.Key}
	if len(c.Certs) > 0 {
		cert.Leaf = c.Certs[0]
	}
	return cert
}

var bothUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}

// NewPeerChains builds the table for the identity name (a valid identity
// name such as web.shop.serviceaccount.identity.linkerd.cluster.local).
// Each refused case differs from the good leaf in one respect only.
func NewPeerChains(t testing.TB, name string) *PeerChains {
	t.Helper()
	anchor := NewAnchor(t, CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, CertOptions{Name: "identity.linkerd.cluster.local"})
	now := time.Now()
	spiffe := &url.URL{Scheme: "spiffe", Host: "cluster.local", Path: "/ns/shop/sa/web"}
	if i := strings.Index(name, ".serviceaccount."); i > 0 {
		sa, ns, _ := strings.Cut(name[:i], ".")
		spiffe.Path = "/ns/" + ns + "/sa/" + sa
	}
	base := func() *x509.Certificate {
		return &x509.Certificate{
			Subject:               pkix.Name{CommonName: name},
			NotBefore:             now.Add(-time.Minute),
			NotAfter:              now.Add(time.Hour),
			DNSNames:              []string{name},
			KeyUsage:              x509.KeyUsageDigitalSignature,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true,
		}
	}
	// leaf signs base() changed by edit with by (issuer unless given) and
	// returns the leaf followed by by's chain.
	leaf := func(edit func(*x509.Certificate), by *CA) PeerChain {
		tmpl := base()
		if edit != nil {
			edit(tmpl)
		}
		tmpl.SerialNumber = serial(t)
		key := GenerateKey(t, ECDSAP256)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, by.Cert, key.Public(), by.Key)
		if err != nil {
			t.Fatalf("testutil: peer chains: create leaf: %v", err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("testutil: peer chains: parse leaf: %v", err)
		}
		return PeerChain{Certs: append([]*x509.Certificate{cert}, by.Chain...), Key: key, Usages: bothUsages}
	}
	refuse := func(c string, edit func(*x509.Certificate)) PeerChain {
		pc := leaf(edit, issuer)
		pc.Case = c
		return pc
	}
	onlyFor := func(pc PeerChain, usage x509.ExtKeyUsage) PeerChain {
		pc.Usages = []x509.ExtKeyUsage{usage}
		return pc
	}
	other := NewAnchor(t, CertOptions{Name: "other-root"}).Issuer(t, CertOptions{Name: "other-issuer"})
	p := &PeerChains{Anchor: anchor, Issuer: issuer, Name: name, Good: leaf(nil, issuer)}
	p.Good.Case = "good"

	unknownRoot := leaf(nil, other)
	unknownRoot.Case = "a chain to an unknown root"
	missingIntermediate := leaf(nil, issuer)
	missingIntermediate.Case = "a leaf without its intermediate"
	missingIntermediate.Certs = missingIntermediate.Certs[:1]
	tooLong := leaf(nil, issuer)
	tooLong.Case = "nine certificates"
	for len(tooLong.Certs) < 9 {
		tooLong.Certs = append(tooLong.Certs, issuer.Cert)
	}
	issuerAsLeaf := PeerChain{Case: "the issuer presented as a leaf", Certs: []*x509.Certificate{issuer.Cert}, Key: issuer.Key, Usages: bothUsages}
	empty := PeerChain{Case: "an empty chain", Usages: bothUsages,
		NotOverTLS: "a TLS server always sends a certificate, and a client without one is anonymous, which the server's policy decides on"}

	p.Refused = []PeerChain{
		onlyFor(refuse("a serverAuth-only leaf presented by a client", func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}), x509.ExtKeyUsageClientAuth),
		onlyFor(refuse("a clientAuth-only leaf presented by a server", func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}), x509.ExtKeyUsageServerAuth),
		refuse("a leaf without extended key usages", func(c *x509.Certificate) { c.ExtKeyUsage = nil }),
		refuse("a leaf with only anyExtendedKeyUsage", func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
		}),
		refuse("a leaf with only emailProtection", func(c *x509.Certificate) {
			c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageEmailProtection}
		}),
		refuse("an expired leaf", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = now.Add(-2*time.Hour), now.Add(-time.Hour)
		}),
		refuse("a leaf not yet valid", func(c *x509.Certificate) {
			c.NotBefore, c.NotAfter = now.Add(time.Hour), now.Add(2*time.Hour)
		}),
		unknownRoot,
		missingIntermediate,
		tooLong,
		empty,
		issuerAsLeaf,
		refuse("a leaf that is a CA", func(c *x509.Certificate) { c.IsCA = true; c.KeyUsage |= x509.KeyUsageCertSign }),
		refuse("a leaf with keyCertSign", func(c *x509.Certificate) { c.KeyUsage |= x509.KeyUsageCertSign }),
		refuse("a leaf with cRLSign", func(c *x509.Certificate) { c.KeyUsage |= x509.KeyUsageCRLSign }),
		refuse("two DNS SANs, both identity names", func(c *x509.Certificate) {
			c.DNSNames = append(c.DNSNames, "other."+name)
		}),
		refuse("a URI SAN with the same workload's SPIFFE ID", func(c *x509.Certificate) { c.URIs = []*url.URL{spiffe} }),
		refuse("the identity only as a SPIFFE ID", func(c *x509.Certificate) {
			c.DNSNames, c.URIs = nil, []*url.URL{spiffe}
		}),
		refuse("an IP SAN", func(c *x509.Certificate) { c.IPAddresses = []net.IP{net.ParseIP("10.0.0.1")} }),
		refuse("an email SAN", func(c *x509.Certificate) { c.EmailAddresses = []string{"web@shop.example"} }),
		refuse("the identity only in the common name", func(c *x509.Certificate) { c.DNSNames = nil }),
		refuse("a DNS SAN that is not an identity name", func(c *x509.Certificate) { c.DNSNames = []string{"www.example.com"} }),
		refuse("an identity name in upper case", func(c *x509.Certificate) { c.DNSNames = []string{strings.ToUpper(name)} }),
		refuse("an identity name with a trailing dot", func(c *x509.Certificate) { c.DNSNames = []string{name + "."} }),
		refuse("a wildcard identity name", func(c *x509.Certificate) {
			_, rest, _ := strings.Cut(name, ".")
			c.DNSNames = []string{"*." + rest}
		}),
		refuse("an identity name with an underscore", func(c *x509.Certificate) { c.DNSNames = []string{"we_b" + name[strings.IndexByte(name, '.'):]} }),
		refuse("an empty DNS SAN", func(c *x509.Certificate) { c.DNSNames = []string{""} }),
	}
	return p
}

// Role names the side that presents a chain verified for usage, for test
// names: "as a client" for clientAuth, "as a server" for serverAuth.
func Role(usage x509.ExtKeyUsage) string {
	switch usage {
	case x509.ExtKeyUsageClientAuth:
		return "as a client"
	case x509.ExtKeyUsageServerAuth:
		return "as a server"
	}
	return "for an unexpected usage"
}
