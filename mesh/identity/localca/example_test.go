package localca_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/localca"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

// ExampleNew loads an issuer from a linkerd.io/tls directory and follows it.
func ExampleNew() {
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{})
	dir, _ := os.MkdirTemp("", "issuer")
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "crt.pem"), issuer.CertPEM, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "key.pem"), issuer.KeyPEM, 0o600)
	bundle, _ := identity.NewBundle(anchor.Cert)
	is, err := localca.New(context.Background(), dir, bundle)
	if err != nil {
		panic(err)
	}
	defer is.Close()
	fmt.Println(is.Certificate().Subject.CommonName)
	// Output: identity.weft.cluster.local
}

// ExampleNewFromLoader builds an issuer over a key pair kept in memory; a
// source that notices changes calls Reload.
func ExampleNewFromLoader() {
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{CommonName: "issuer-1"})
	bundle, _ := identity.NewBundle(anchor.Cert)
	current := issuer
	is, err := localca.NewFromLoader(context.Background(), "memory",
		func() ([]byte, []byte, error) { return current.CertPEM, current.KeyPEM, nil }, bundle)
	if err != nil {
		panic(err)
	}
	defer is.Close()
	current, _ = pki.NewIssuer(anchor, pki.Options{CommonName: "issuer-2"})
	if err := is.Reload(); err != nil {
		panic(err)
	}
	fmt.Println(is.Certificate().Subject.CommonName)
	// Output: issuer-2
}
