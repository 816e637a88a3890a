package dataplane_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/client"
	idpki "github.com/weftmesh/weft/mesh/identity/pki"
)

// Example runs the mesh's data path on loopback: an identity service
// certifies two workloads from a trust anchor made at run time, web's
// proxy sends one request for api.shop.svc.cluster.local to api's proxy
// over mutual TLS, and api's proxy lets it through to the application
// because the caller proved an identity, which the application reads in
// l5d-client-id. In a pod the identity,
// resolver and policies come from the control plane's clients instead
// (mesh/dataplane/control), and the listeners from Listen.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The trust anchor and issuer, as `weft certs` makes them, and the
	// identity service with two workloads' tokens.
	anchor, _ := idpki.NewAnchor(idpki.Options{})
	issuer, _ := idpki.NewIssuer(anchor, idpki.Options{})
	bundle, _ := identity.NewBundle(anchor.Cert)
	ca, _ := identity.NewCA(issuer.Cert, issuer.Key, nil, bundle)
	svc, _ := identity.NewService(ctx, identity.Tokens{
		"web-token-0123456789": {Namespace: "shop", Name: "web"},
		"api-token-0123456789": {Namespace: "shop", Name: "api"},
	}, ca)
	// certified is a workload's identity: a key made in the process and a
	// certificate from the service, renewed until Close.
	certified := func(sa, token string) *control.Identity {
		name, _ := identity.DefaultDomain().Name("shop", sa)
		c, err := client.New(ctx, client.Config{Name: name, Bundle: bundle, Certifier: svc},
			client.WithToken(func() ([]byte, error) { return []byte(token), nil }))
		if err != nil {
			panic(err)
		}
		go func() { <-ctx.Done(); c.Close() }()
		id, _ := control.NewIdentity(c)
		return id
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		return ln
	}
	port := func(ln net.Listener) uint16 { return uint16(ln.Addr().(*net.TCPAddr).Port) }

	// api: the application and its proxy, which admits only callers that
	// proved a mesh identity.
	app := listen()
	defer app.Close()
	go func() {
		_ = http.Serve(app, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The proxy hands on the identity the caller proved over mTLS.
			fmt.Fprintf(w, "%s %s from %s\n", r.Method, r.URL.Path, r.Header.Get("l5d-client-id"))
		}))
	}()
	policies := dataplane.NewMemoryPolicies()
	srv, _ := dataplane.DefaultInboundServer(dataplane.AllAuthenticated, nil)
	policies.Set(uint32(port(app)), srv)
	apiInbound := listen()
	apiProxy, _ := dataplane.New(ctx, dataplane.DefaultConfig(), certified("api", "api-token-0123456789"), nil, policies)
	go func() { _ = apiProxy.Run(ctx, dataplane.Listeners{Inbound: apiInbound}) }()

	// web: its proxy knows where api's endpoint is, which identity it must
	// present, and the proxy port that takes mesh traffic for it.
	resolver := dataplane.NewMemoryResolver()
	target := fmt.Sprintf("api.shop.svc.cluster.local:%d", port(app))
	resolver.Set(target, dataplane.Endpoint{
		Addr:                netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port(app)),
		Identity:            "api.shop.serviceaccount.identity.weft.cluster.local",
		OpaqueTransportPort: port(apiInbound),
	})
	webOut := listen()
	webProxy, _ := dataplane.New(ctx, dataplane.DefaultConfig(), certified("web", "web-token-0123456789"), resolver, nil)
	go func() {
		_ = webProxy.Run(ctx, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: webOut, Authority: target}}})
	}()

	// web's application calls api through its proxy.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+webOut.Addr().String()+"/orders", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(resp.Status, ": ", string(body))
	// Output: 200 OK: GET /orders from web.shop.serviceaccount.identity.weft.cluster.local
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
