package viz_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/viz"
)

func TestParseRouteTargetAcceptsServicesAndAddresses(t *testing.T) {
	for in, want := range map[string]viz.RouteTarget{
		"api":                          {Service: "api", Namespace: "shop"},
		"svc/api":                      {Service: "api", Namespace: "shop"},
		"service/api":                  {Service: "api", Namespace: "shop"},
		"services/api:8080":            {Service: "api", Namespace: "shop", Port: 8080},
		"api:8080":                     {Service: "api", Namespace: "shop", Port: 8080},
		"api.other":                    {Service: "api", Namespace: "other"},
		"api.other.svc":                {Service: "api", Namespace: "other"},
		"api.other.svc.cluster.local":  {Service: "api", Namespace: "other", Domain: "cluster.local"},
		"API.Other.svc.cluster.local.": {Service: "api", Namespace: "other", Domain: "cluster.local"},
		"api.other.svc.example.org:80": {Service: "api", Namespace: "other", Domain: "example.org", Port: 80},
		"10.96.0.10:8080":              {Addr: netip.MustParseAddr("10.96.0.10"), Port: 8080},
		"10.96.0.10":                   {Addr: netip.MustParseAddr("10.96.0.10")},
		"[fd00::1]:8080":               {Addr: netip.MustParseAddr("fd00::1"), Port: 8080},
		"egressnetwork/internet":       {EgressNetwork: "internet", Namespace: "shop"},
		"EgressNetworks/internet:443":  {EgressNetwork: "internet", Namespace: "shop", Port: 443},
		"egress/partners.example":      {EgressNetwork: "partners.example", Namespace: "shop"},
	} {
		got, err := viz.ParseRouteTarget(in, "shop")
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
}

func TestParseRouteTargetRefusesWhatIsNoServiceOrAddress(t *testing.T) {
	for in, why := range map[string]string{
		"":                        "is empty",
		"deploy/api":              "not a Service",
		"svc/api.other":           "has a dot",
		"api:http":                "port",
		"api:0":                   "port",
		"api:70000":               "port",
		"10.96.0.10:0":            "port 0",
		"api_x":                   "not a DNS name",
		"api..svc":                "not a DNS name",
		"api.other.cluster.local": "not a Service's name",
		"-api":                    "not a DNS name",
		strings.Repeat("a", 301):  "too long",
		"egressnetwork/":          "no EgressNetwork name",
		"egressnetwork/Internet":  "not an EgressNetwork's name",
		"egressnetwork/a_b":       "not an EgressNetwork's name",
		"egressnetwork/a:0":       "port",
		"egressnetwork/a:https":   "port",
		"egressnetwork/a/b":       "not an EgressNetwork's name",
	} {
		_, err := viz.ParseRouteTarget(in, "shop")
		if assert.Error(t, err, in) {
			assert.ErrorIs(t, err, viz.ErrRouteTarget, in)
			assert.Contains(t, err.Error(), why, in)
			assert.Contains(t, err.Error(), "want a Service", in)
		}
	}
	_, err := viz.ParseRouteTarget("api", "")
	assert.ErrorContains(t, err, "needs a namespace")
	_, err = viz.ParseRouteTarget("egressnetwork/internet", "")
	assert.ErrorContains(t, err, "needs a namespace")
}

func TestRouteTargetMatchesTheCanonicalDstLabel(t *testing.T) {
	api := viz.RouteTarget{Service: "api", Namespace: "shop"}
	assert.True(t, api.Matches("api.shop.svc.cluster.local:8080"))
	assert.True(t, api.Matches("api.shop.svc.example.org:8080"), "any cluster domain")
	assert.False(t, api.Matches("api.other.svc.cluster.local:8080"), "another namespace's api")
	assert.False(t, api.Matches("apiv2.shop.svc.cluster.local:8080"), "not a prefix match")
	assert.False(t, api.Matches("10.96.0.10:8080"))
	withPort := viz.RouteTarget{Service: "api", Namespace: "shop", Port: 8080}
	assert.True(t, withPort.Matches("api.shop.svc.cluster.local:8080"))
	assert.False(t, withPort.Matches("api.shop.svc.cluster.local:9090"))
	fqdn := viz.RouteTarget{Service: "api", Namespace: "shop", Domain: "cluster.local"}
	assert.True(t, fqdn.Matches("API.shop.svc.cluster.local:8080"))
	assert.False(t, fqdn.Matches("api.shop.svc.example.org:8080"))
	addr := viz.RouteTarget{Addr: netip.MustParseAddr("10.96.0.10"), Port: 8080}
	assert.True(t, addr.Matches("10.96.0.10:8080"))
	assert.False(t, addr.Matches("10.96.0.10:8081"))
	assert.False(t, addr.Matches("10.96.0.100:8080"))
	v6 := viz.RouteTarget{Addr: netip.MustParseAddr("fd00::1"), Port: 80}
	assert.True(t, v6.Matches("[fd00::1]:80"))
}

// webRoutes is web's proxy calling api's Service: route series as Weft's
// proxies write them (dst the Service's canonical name, tls on the
// responses, "default" for requests no route named), and one to an
// address that is no Service.
const webRoutes = `# TYPE route_response_total counter
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="GET /items",status_code="200",classification="success",tls="true"} 30
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="GET /items",status_code="500",classification="failure",tls="true"} 10
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="default",status_code="200",classification="success",tls="true"} 3
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="default",status_code="200",classification="success",tls="no_identity"} 1
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="default",status_code="503",classification="failure",error="no-endpoints"} 4
route_response_total{direction="outbound",dst="192.0.2.7:80",rt_route="default",status_code="200",classification="success",tls="no_identity"} 5
`

func TestRoutesToAServiceShowItsRoutesWithTheShareOverMutualTLS(t *testing.T) {
	w := window(t, 0, webPod, "", webRoutes)
	web := viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "web"}
	for _, to := range []string{"api", "svc/api", "service/api", "api.shop.svc.cluster.local", "api:8080"} {
		target, err := viz.ParseRouteTarget(to, "shop")
		require.NoError(t, err)
		rows := viz.Routes(w, web, &target)
		require.Len(t, rows, 2, to)
		items, def := rows[0], rows[1]
		assert.Equal(t, "GET /items", items.Route, to)
		assert.Equal(t, "api.shop.svc.cluster.local:8080", items.Authority)
		assert.Equal(t, 40.0, items.Requests())
		assert.Equal(t, 0.75, items.SuccessRate())
		assert.Equal(t, 1.0, items.MTLSShare(), "every response came over mutual TLS")
		assert.Equal(t, viz.DefaultRoute, def.Route, "unmatched traffic is [DEFAULT], last")
		assert.Equal(t, 8.0, def.Requests())
		assert.Equal(t, 3.0/8, def.MTLSShare(), "answers the proxy gave itself reached no endpoint: not mutual TLS")
	}
	target, err := viz.ParseRouteTarget("192.0.2.7:80", "shop")
	require.NoError(t, err)
	rows := viz.Routes(w, web, &target)
	require.Len(t, rows, 1)
	assert.Equal(t, 5.0, rows[0].Requests())
	assert.Equal(t, 0.0, rows[0].MTLSShare())

	other, err := viz.ParseRouteTarget("svc/api", "other")
	require.NoError(t, err)
	assert.Empty(t, viz.Routes(w, web, &other), "a Service of the same name in another namespace")
	assert.Empty(t, viz.Routes(w, web, nil), "web serves no routes")
}

// egressRoutes is web's proxy calling two addresses under EgressNetwork
// internet (Deny, with a route allowing GET /get) and one under another
// namespace's EgressNetwork of the same name: route series as Weft's
// proxies write them, with Linkerd's parent labels.
const egressRoutes = `# TYPE route_response_total counter
route_response_total{direction="outbound",dst="203.0.113.7:443",rt_route="httproute/shop/allow-get",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_namespace="shop",parent_name="internet",status_code="200",classification="success",tls="no_identity"} 6
route_response_total{direction="outbound",dst="203.0.113.7:443",rt_route="http-egress-deny",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_namespace="shop",parent_name="internet",status_code="403",classification="failure",tls="no_identity"} 2
route_response_total{direction="outbound",dst="198.51.100.9:80",rt_route="http-egress-deny",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_namespace="shop",parent_name="internet",status_code="403",classification="failure",tls="no_identity"} 3
route_response_total{direction="outbound",dst="192.0.2.1:80",rt_route="http-egress-allow",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_namespace="linkerd-egress",parent_name="internet",status_code="200",classification="success",tls="no_identity"} 4
route_response_total{direction="outbound",dst="api.shop.svc.cluster.local:8080",rt_route="default",status_code="200",classification="success",tls="true"} 5
`

func TestRoutesToAnEgressNetworkShowItsRoutesPerDestinationAddress(t *testing.T) {
	w := window(t, 0, webPod, "", egressRoutes)
	web := viz.Resource{Kind: viz.KindWorkload, Namespace: "shop", Name: "web"}
	to, err := viz.ParseRouteTarget("egressnetwork/internet", "shop")
	require.NoError(t, err)
	rows := viz.Routes(w, web, &to)
	require.Len(t, rows, 3)
	assert.Equal(t, [3]string{"198.51.100.9:80", "http-egress-deny", "shop/internet"}, [3]string{rows[0].Authority, rows[0].Route, rows[0].EgressNetwork})
	assert.Equal(t, 3.0, rows[0].Requests())
	assert.Equal(t, 0.0, rows[0].SuccessRate(), "the Deny policy refused them all")
	assert.Equal(t, [2]string{"203.0.113.7:443", "http-egress-deny"}, [2]string{rows[1].Authority, rows[1].Route}, "the built-in route keeps its name")
	assert.Equal(t, 2.0, rows[1].Requests())
	assert.Equal(t, [2]string{"203.0.113.7:443", "httproute/shop/allow-get"}, [2]string{rows[2].Authority, rows[2].Route})
	assert.Equal(t, 6.0, rows[2].Requests())

	port, err := viz.ParseRouteTarget("egress/internet:443", "shop")
	require.NoError(t, err)
	assert.Len(t, viz.Routes(w, web, &port), 2, "only the destinations on port 443")

	global, err := viz.ParseRouteTarget("egressnetwork/internet", "linkerd-egress")
	require.NoError(t, err)
	rows = viz.Routes(w, web, &global)
	require.Len(t, rows, 1, "the global namespace's EgressNetwork of the same name is another one")
	assert.Equal(t, "http-egress-allow", rows[0].Route)

	addr, err := viz.ParseRouteTarget("198.51.100.9:80", "shop")
	require.NoError(t, err)
	rows = viz.Routes(w, web, &addr)
	require.Len(t, rows, 1)
	assert.Equal(t, "shop/internet", rows[0].EgressNetwork, "an address target says which EgressNetwork its routes are")

	svc, err := viz.ParseRouteTarget("svc/api", "shop")
	require.NoError(t, err)
	rows = viz.Routes(w, web, &svc)
	require.Len(t, rows, 1)
	assert.Empty(t, rows[0].EgressNetwork)
	assert.False(t, to.Matches("203.0.113.7:443"), "an EgressNetwork target is matched by its parent labels, not a dst")
	assert.False(t, to.MatchesSeries(map[string]string{"dst": "203.0.113.7:443", "parent_kind": "EgressNetwork", "parent_group": "example.com", "parent_namespace": "shop", "parent_name": "internet"}),
		"a parent of another group is not Linkerd's EgressNetwork")
}

func TestEdgesShowTrafficThatLeftTheMeshUnderItsEgressNetwork(t *testing.T) {
	w := window(t, 0, webPod, "", egressRoutes)
	var egress []viz.Edge
	for _, e := range viz.Edges(w) {
		if e.Dst.Kind == viz.KindEgressNetwork {
			egress = append(egress, e)
		}
	}
	require.Len(t, egress, 2, "one edge per EgressNetwork, whatever the addresses")
	global, local := egress[0], egress[1]
	assert.Equal(t, viz.Workload{Namespace: "linkerd-egress", Kind: viz.KindEgressNetwork, Name: "internet"}, global.Dst)
	assert.Equal(t, 4.0, global.Out.Requests())
	assert.Zero(t, global.Denied)
	assert.Equal(t, viz.Workload{Namespace: "shop", Kind: viz.KindEgressNetwork, Name: "internet"}, local.Dst)
	assert.Equal(t, "web", local.Src.Name)
	assert.Equal(t, 11.0, local.Out.Requests())
	assert.Equal(t, 6.0, local.Out.Successes)
	assert.Equal(t, 5.0, local.Denied, "the requests its Deny policy refused")
	assert.False(t, local.Secured(), "traffic out of the mesh is not mutual TLS")
}

// What a proxy exports for an opaque connection an EgressNetwork let out
// and one its Deny policy refused (as TestStreamRouteMetricsNameTheParentAndTheRouteAsLinkerdDoes
// reads them from a real proxy), and one on a Service's TCPRoute.
const egressConnections = `# TYPE outbound_tcp_route_open_total counter
outbound_tcp_route_open_total{parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_name="internet",parent_namespace="shop",parent_port="5432",parent_section_name="",route_group="",route_kind="default",route_name="tcp-egress-allow",route_namespace="",target_ip="203.0.113.7",target_port="5432"} 3
outbound_tcp_route_open_total{parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_name="internet",parent_namespace="shop",parent_port="6379",parent_section_name="",route_group="",route_kind="default",route_name="tcp-egress-deny",route_namespace="",target_ip="198.51.100.9",target_port="6379"} 2
outbound_tcp_route_open_total{parent_group="core",parent_kind="Service",parent_name="db",parent_namespace="shop",parent_port="7000",parent_section_name="",route_group="gateway.networking.k8s.io",route_kind="TCPRoute",route_name="to-db-blue",route_namespace="shop",target_ip="10.0.0.9",target_port="7000"} 7
# TYPE outbound_tcp_route_close_total counter
outbound_tcp_route_close_total{error="",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_name="internet",parent_namespace="shop",parent_port="5432",parent_section_name="",route_group="",route_kind="default",route_name="tcp-egress-allow",route_namespace="",target_ip="203.0.113.7",target_port="5432"} 3
outbound_tcp_route_close_total{error="forbidden",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_name="internet",parent_namespace="shop",parent_port="6379",parent_section_name="",route_group="",route_kind="default",route_name="tcp-egress-deny",route_namespace="",target_ip="198.51.100.9",target_port="6379"} 2
# TYPE outbound_tls_route_open_total counter
outbound_tls_route_open_total{hostname="",parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_name="internet",parent_namespace="shop",parent_port="443",parent_section_name="",route_group="gateway.networking.k8s.io",route_kind="TLSRoute",route_name="to-api-example",route_namespace="shop"} 4
`

func TestEdgesShowOpaqueAndTLSConnectionsThatLeftTheMeshUnderItsEgressNetwork(t *testing.T) {
	w := window(t, 0, webPod, "", egressConnections)
	var egress []viz.Edge
	for _, e := range viz.Edges(w) {
		if e.Dst.Kind == viz.KindEgressNetwork {
			egress = append(egress, e)
		}
	}
	require.Len(t, egress, 1, "one edge per EgressNetwork; the Service's TCPRoute is not egress")
	e := egress[0]
	assert.Equal(t, viz.Workload{Namespace: "shop", Kind: viz.KindEgressNetwork, Name: "internet"}, e.Dst)
	assert.Equal(t, "web", e.Src.Name)
	assert.Equal(t, 9.0, e.Connections, "3 let out, 2 refused, 4 on a TLSRoute")
	assert.Equal(t, 2.0, e.Denied, "the connections its Deny policy refused")
	assert.Zero(t, e.Out.Requests(), "no HTTP requests")
}
