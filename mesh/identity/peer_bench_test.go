package identity_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// BenchmarkVerifyPeerChain is the rule the data plane applies on every
// mesh TLS handshake, on a chain crypto/tls has already parsed.
func BenchmarkVerifyPeerChain(b *testing.B) {
	pc := testutil.NewPeerChains(b, "web.shop.serviceaccount.identity.linkerd.cluster.local")
	roots := testutil.Pool(pc.Anchor)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := identity.VerifyPeerChain(roots, pc.Good.Certs, now, x509.ExtKeyUsageClientAuth); err != nil {
			b.Fatal(err)
		}
	}
}
