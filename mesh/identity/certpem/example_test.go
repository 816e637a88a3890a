package certpem_test

import (
	"fmt"

	"github.com/weftmesh/weft/mesh/identity/certpem"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// ParseKeyPair reads an issuer's certificate and key as Linkerd's issuer
// Secret holds them, and checks that the key is the certificate's.
func ExampleParseKeyPair() {
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{})
	cert, chain, _, err := certpem.ParseKeyPair(issuer.CertPEM, issuer.KeyPEM)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cert.Subject.CommonName, len(chain))

	_, _, _, err = certpem.ParseKeyPair(issuer.CertPEM, anchor.KeyPEM)
	fmt.Println("another key refused:", err != nil)
	_, err = certpem.ParseCertificates([]byte("not PEM"))
	fmt.Println("garbage refused:", err != nil)
	// Output:
	// identity.weft.cluster.local 0
	// another key refused: true
	// garbage refused: true
}
