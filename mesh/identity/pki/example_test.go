package pki_test

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/identity/pki"
)

func ExampleNewIssuer() {
	anchor, err := pki.NewAnchor(pki.Options{Lifetime: 10 * 365 * 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	issuer, err := pki.NewIssuer(anchor, pki.Options{})
	if err != nil {
		panic(err)
	}
	r := pki.Inspect([]pki.Entry{{Source: "crt.pem", Cert: issuer.Cert}}, []*x509.Certificate{anchor.Cert}, time.Now())[0]
	fmt.Println(r.Subject, r.IsCA, r.OK())
	// Output: CN=identity.weft.cluster.local true true
}
