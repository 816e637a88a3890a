package static_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/static"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/pki"
)

const proxyFile = `identity:
  name: web.shop.serviceaccount.identity.weft.cluster.local
  certificate: web.crt
  key: web.key
  trustAnchors: roots.pem
destinations:
  "api.shop.svc.cluster.local:8080":
    - address: 10.1.0.7:8080
      identity: api.shop.serviceaccount.identity.weft.cluster.local
      opaqueTransportPort: 4143
policies:
  "8080":
    protocol: {detect: {}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: api.shop.serviceaccount.identity.weft.cluster.local}]}}}
`

// Load a proxy's inputs from one file: its certificate, where api's
// endpoint is, and who may call port 8080. The certificate files are made
// here with mesh/identity/pki and the identity CA; on a host they come
// from `weft certs` or a CA of your own. The Sources go to dataplane.New
// as they are.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "weft-static")
	defer os.RemoveAll(dir)
	writeWebCertificate(dir)
	path := filepath.Join(dir, "proxy.yaml")
	_ = os.WriteFile(path, []byte(proxyFile), 0o600)

	src, err := static.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("identity:", src.Identity.Name())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eps, _ := src.Resolver.Resolve(ctx, "api.shop.svc.cluster.local:8080")
	for _, e := range <-eps {
		fmt.Println("api endpoint:", e.Addr, e.Identity, "via port", e.OpaqueTransportPort)
	}
	pols, _ := src.Policies.Watch(ctx, 8080)
	srv := <-pols
	fmt.Println("port 8080 authorizations:", len(srv.GetAuthorizations()))

	_, err = dataplane.New(ctx, dataplane.DefaultConfig(), src.Identity, src.Resolver, src.Policies,
		dataplane.WithOutboundPolicies(src.OutboundPolicies), dataplane.WithProfiles(src.Profiles))
	fmt.Println("proxy built:", err == nil)
	// Output:
	// identity: web.shop.serviceaccount.identity.weft.cluster.local
	// api endpoint: 10.1.0.7:8080 api.shop.serviceaccount.identity.weft.cluster.local via port 4143
	// port 8080 authorizations: 1
	// proxy built: true
}

// writeWebCertificate writes roots.pem, web.crt and web.key into dir.
func writeWebCertificate(dir string) {
	anchor, _ := pki.NewAnchor(pki.Options{})
	issuer, _ := pki.NewIssuer(anchor, pki.Options{})
	bundle, _ := identity.NewBundle(anchor.Cert)
	ca, _ := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	name, _ := identity.DefaultDomain().Name("shop", "web")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name.String()}}, key)
	csr, _ := x509.ParseCertificateRequest(der)
	now := time.Now()
	issued, err := ca.Issue(context.Background(), identity.IssueRequest{CSR: csr, Name: name, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour)})
	if err != nil {
		panic(err)
	}
	chain := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issued.Leaf.Raw})
	for _, c := range issued.Intermediates {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	_ = os.WriteFile(filepath.Join(dir, "roots.pem"), anchor.CertPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "web.crt"), chain, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "web.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}
