package authz_test

import (
	"fmt"
	"net/netip"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

func ExampleEvaluate() {
	gateway, _ := authz.NewAuthentication("api-gateway.my-app.serviceaccount.identity.weft.cluster.local")
	srv := &authz.Server{
		Meta:     authz.Meta{Group: "policy.linkerd.io", Kind: "Server", Namespace: "my-app", Name: "web-http"},
		Protocol: authz.ProtocolHTTP1,
		Authorizations: []authz.Authorization{{
			Meta:           authz.Meta{Group: "policy.linkerd.io", Kind: "AuthorizationPolicy", Namespace: "my-app", Name: "web-api-gateway"},
			Networks:       authz.AllNetworks(),
			Authentication: gateway,
		}},
		HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()},
	}
	peer := netip.MustParseAddr("10.42.0.7")
	res := authz.Evaluate(srv, authz.Conn{IP: peer, TLS: true, Identity: "api-gateway.my-app.serviceaccount.identity.weft.cluster.local"},
		&authz.Request{Method: "GET", Path: "/public/../items"})
	fmt.Println(res.Decision, res.Reason, res.Path)
	res = authz.Evaluate(srv, authz.Conn{IP: peer}, nil)
	fmt.Println(res.Decision, res.Reason)
	// Output:
	// allow authorized /items
	// deny unauthorized
}
