package dataplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/authz"
)

// Example wires a proxy from in-memory inputs and runs it until its
// context ends. In a pod the inputs are the identity, destination and
// policy clients instead.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	var cert tls.Certificate // the workload certificate, from the identity service
	var roots *x509.CertPool // the trust anchors
	id, err := dataplane.NewStaticIdentity("web.shop.serviceaccount.identity.linkerd.cluster.local", cert, roots)
	if err != nil {
		fmt.Println("no certificate yet:", err != nil)
		cancel()
		return
	}
	resolver := dataplane.NewMemoryResolver()
	resolver.Set("api.shop.svc.cluster.local:8080", dataplane.Endpoint{
		Addr:     netip.MustParseAddrPort("10.1.0.7:8080"),
		Identity: "api.shop.serviceaccount.identity.linkerd.cluster.local",
	})
	policies := dataplane.NewMemoryPolicies()
	srv, _ := authz.DefaultServer(authz.AllAuthenticated, nil)
	policies.Set(8080, srv)

	cfg := dataplane.DefaultConfig()
	p, _ := dataplane.New(ctx, cfg, id, resolver, policies)
	ls, _ := dataplane.Listen(ctx, cfg)
	go cancel() // SIGTERM
	_ = p.Run(ctx, ls)
	// Output: no certificate yet: true
}
