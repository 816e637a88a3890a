package client_test

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// ExampleNew obtains a workload certificate from an in-process identity
// service; a proxy passes client.NewGRPCCertifier(conn) instead.
func ExampleNew() {
	ctx := context.Background()
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{})
	bundle, _ := identity.NewBundle(anchor.Cert)
	ca, _ := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	svc, _ := identity.NewService(ctx, identity.Tokens{"web-token": {Namespace: "shop", Name: "web"}}, ca)

	name, _ := identity.DefaultDomain().Name("shop", "web")
	c, err := client.New(ctx, client.Config{Name: name, Bundle: bundle, Certifier: svc},
		client.WithToken(func() ([]byte, error) { return []byte("web-token"), nil }))
	if err != nil {
		panic(err)
	}
	defer c.Close()

	cert, _ := c.Certificate()
	fmt.Println(cert.Leaf.DNSNames[0])
	// c.ServerTLSConfig(nil) and c.ClientTLSConfig(peer) plug into TLS listeners and dialers.
	fmt.Println(c.ClientTLSConfig(name).MinVersion == 0x0304)
	// Output:
	// web.shop.serviceaccount.identity.weft.cluster.local
	// true
}
