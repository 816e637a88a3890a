package route_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// BenchmarkSelect is the per-request cost of choosing a route among a
// handful of HTTP routes (hosts, prefixes, an exact path, a regex, a
// method and a header) and among gRPC routes. Selection must not
// allocate.
func BenchmarkSelect(b *testing.B) {
	get := &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}
	regex := &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: "/api/v1/items/[0-9]+"}}}
	canary := &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/api"}}, Headers: []*httproute.HeaderMatch{{Name: "x-canary", Value: &httproute.HeaderMatch_Exact{Exact: []byte("1")}}}}
	hosts := []*httproute.HostMatch{
		{Match: &httproute.HostMatch_Exact{Exact: "web.shop.svc.cluster.local"}},
		{Match: &httproute.HostMatch_Suffix_{Suffix: &httproute.HostMatch_Suffix{ReverseLabels: []string{"local", "cluster"}}}},
	}
	pol := httpPolicy(
		&outbound.HttpRoute{Metadata: md("root"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/")})}},
		&outbound.HttpRoute{Metadata: md("api"), Hosts: hosts, Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/api")})}},
		&outbound.HttpRoute{Metadata: md("api-v1"), Hosts: hosts, Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/api/v1")})}},
		&outbound.HttpRoute{Metadata: md("login"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{exact("/api/v1/login")})}},
		&outbound.HttpRoute{Metadata: md("item"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{regex})}},
		&outbound.HttpRoute{Metadata: md("get"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/api"}}, Method: get}})}},
		&outbound.HttpRoute{Metadata: md("canary"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{canary})}},
	)
	r, err := route.Compile(pol, nil, target)
	require.NoError(b, err)
	rq := route.Request{Method: "GET", Path: "/api/v1/items/42", Host: "web.shop.svc.cluster.local", Header: http.Header{"X-Canary": {"1"}, "Accept": {"*/*"}}}
	b.Run("http", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Select(rq)
		}
	})

	rpc := func(svc, method string) *outbound.GrpcRoute_Rule {
		return &outbound.GrpcRoute_Rule{Matches: []*grpcroute.GrpcRouteMatch{{Rpc: &grpcroute.GrpcRpcMatch{Service: svc, Method: method}}}}
	}
	gpol := &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{Routes: []*outbound.GrpcRoute{
		{Metadata: md("any"), Rules: []*outbound.GrpcRoute_Rule{{}}},
		{Metadata: md("svc"), Rules: []*outbound.GrpcRoute_Rule{rpc("shop.Cart", "")}},
		{Metadata: md("method"), Rules: []*outbound.GrpcRoute_Rule{rpc("shop.Cart", "Add")}},
		{Metadata: md("other"), Rules: []*outbound.GrpcRoute_Rule{rpc("shop.Orders", "List")}},
	}}}}}
	g, err := route.Compile(gpol, nil, target)
	require.NoError(b, err)
	grq := route.Request{Method: "POST", Path: "/shop.Cart/Add", Host: "web.shop.svc.cluster.local", Header: http.Header{"Content-Type": {"application/grpc"}}, HTTP2: true, GRPC: true}
	b.Run("grpc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g.Select(grq)
		}
	})
}
