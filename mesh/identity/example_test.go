package identity_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

func ExampleParseName() {
	n, err := identity.ParseName("web.shop.serviceaccount.identity.weft.cluster.local")
	if err != nil {
		panic(err)
	}
	fmt.Println(n.Namespace, n.ServiceAccount, n.Domain.TrustDomain)
	fmt.Println(n.SPIFFEID())
	// Output:
	// shop web cluster.local
	// spiffe://cluster.local/ns/shop/sa/web
}

// ExampleService_Certify runs the identity service in-process: an issuer
// under a trust anchor, a token table, and one Certify call.
func ExampleService_Certify() {
	ctx := context.Background()
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{})
	bundle, _ := identity.NewBundle(anchor.Cert)
	ca, err := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	if err != nil {
		panic(err)
	}
	tokens := identity.Tokens{"s3cret": {Namespace: "shop", Name: "web"}}
	svc, err := identity.NewService(ctx, tokens, ca)
	if err != nil {
		panic(err)
	}

	// The workload side: a key that never leaves it, and a CSR for its name.
	name, _ := identity.DefaultDomain().Name("shop", "web")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name.String()}}, key)

	issued, err := svc.Certify(ctx, identity.Request{Identity: name.String(), Token: []byte("s3cret"), CSR: csr})
	if err != nil {
		panic(err)
	}
	fmt.Println(issued.Leaf.DNSNames[0])
	fmt.Println(issued.Leaf.NotAfter.Sub(issued.Leaf.NotBefore).Round(time.Second))

	// Another token, or a mismatched name, is refused.
	_, err = svc.Certify(ctx, identity.Request{Identity: name.String(), Token: []byte("guess"), CSR: csr})
	fmt.Println(identity.Code(err))
	// Output:
	// web.shop.serviceaccount.identity.weft.cluster.local
	// 24h0m20s
	// Unauthenticated
}
