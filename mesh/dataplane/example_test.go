package dataplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"

	"github.com/weftmesh/weft/mesh/dataplane"
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
	srv, _ := dataplane.DefaultInboundServer(dataplane.AllAuthenticated, nil)
	policies.Set(8080, srv)

	cfg := dataplane.DefaultConfig()
	p, _ := dataplane.New(ctx, cfg, id, resolver, policies)
	ls, _ := dataplane.Listen(ctx, cfg)
	go cancel() // SIGTERM
	_ = p.Run(ctx, ls)
	// Output: no certificate yet: true
}

// ExampleWithOutboundPolicies gives a proxy the client-side policy of a
// destination: here one route whose GET and HEAD requests are retried on
// 5xx, with a 2s request timeout. The outbound policy client of the
// control plane satisfies OutboundPolicies the same way.
func ExampleWithOutboundPolicies() {
	policies := dataplane.NewMemoryOutboundPolicies()
	policies.Set("api.shop.svc.cluster.local:8080", &outbound.OutboundPolicy{
		Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
			Http1: &outbound.ProxyProtocol_Http1{Routes: []*outbound.HttpRoute{{
				Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "api"}},
				Rules: []*outbound.HttpRoute_Rule{{
					Timeouts: &httproute.Timeouts{Request: durationpb.New(2 * time.Second)},
					Retry: &outbound.HttpRoute_Retry{MaxRetries: 2, Conditions: &outbound.HttpRoute_Retry_Conditions{
						StatusRanges: []*outbound.HttpRoute_Retry_Conditions_StatusRange{{Start: 500, End: 599}},
					}},
				}},
			}}},
		}}},
	})
	profiles := dataplane.NewMemoryProfiles()
	opts := []dataplane.Option{dataplane.WithOutboundPolicies(policies), dataplane.WithProfiles(profiles)}
	fmt.Println(len(opts), "options for dataplane.New")
	// Output: 2 options for dataplane.New
}
