package dataplane_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

var anyone = authz.Authorization{Meta: authz.Meta{Kind: "AuthorizationPolicy", Name: "anyone"}, Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}

// routedServer admits anyone on the given HTTP routes and nothing else.
func routedServer(protocol authz.Protocol, routes ...authz.HTTPRoute) *inbound.Server {
	for i := range routes {
		routes[i].Authorizations = []authz.Authorization{anyone}
	}
	return authz.ToProto(&authz.Server{Meta: authz.Meta{Kind: "Server", Name: "web"}, Protocol: protocol, HTTPRoutes: routes})
}

func prefixRoute(name, p string) authz.HTTPRoute {
	return authz.HTTPRoute{Meta: authz.Meta{Kind: "HTTPRoute", Name: name}, Rules: []authz.HTTPRule{{Matches: []authz.HTTPMatch{{Path: &authz.PathMatch{Kind: authz.PathPrefix, Value: p}}}}}}
}

func TestInboundPolicyDecidesOnThePathTheApplicationSees(t *testing.T) {
	// T07: the decision is made on the normalized path, which is the path
	// forwarded; ambiguous encodings are refused.
	app := startHTTPApp(t)
	r, addr := plainInbound(t, routedServer(authz.ProtocolHTTP1, prefixRoute("public", "/public")), app)
	cases := []struct {
		target string
		status int
		sees   string
	}{
		{"/public/a", 200, "/public/a"},
		{"/public/../admin", 404, ""},
		{"//public/a", 200, "/public/a"},
		{"/./public/a", 200, "/public/a"},
		{"/%70ublic/a", 200, "/public/a"},
		{"/public%2Fa", 400, ""},
		{"/public%2fa", 400, ""},
		{"/public/%2e%2e/admin", 404, ""},
		{"/public/%2E%2E/%2e%2e/admin", 404, ""},
		{"/public/%252e%252e/admin", 200, "/public/%252e%252e/admin"},
		{"/public\\..\\admin", 400, ""},
		{"/public/a;x=1", 200, "/public/a;x=1"},
		{"/..;/admin", 400, ""},
		{"/public/..;/admin", 400, ""},
		{"/public/a%00", 400, ""},
		{"/PUBLIC/a", 404, ""},
		{"/admin", 404, ""},
		{"/public/a?next=../../admin", 200, "/public/a?next=../../admin"},
		{"/public/a#frag", 400, ""},
	}
	for _, c := range cases {
		t.Run(c.target, func(t *testing.T) {
			before := app.requests.Load()
			resp, _ := rawExchange(t, addr, "GET "+c.target+" HTTP/1.1\r\nHost: web\r\n\r\n")
			assert.Equal(t, c.status, resp.StatusCode)
			if c.sees != "" {
				assert.Equal(t, c.sees, app.last().RequestURI, "the application sees the path the policy decided on")
			} else {
				assert.Equal(t, before, app.requests.Load(), "a denied request never reaches the application")
				if c.status != 400 || resp.Header.Get("Weft-Deny-Reason") != "" {
					assert.NotEmpty(t, resp.Header.Get("Weft-Deny-Reason"), "the reason class is named")
				}
			}
		})
	}
	assert.Positive(t, r.metric(t, "inbound_http_route_not_found_total", `srv_name=`))
	assert.Positive(t, r.metric(t, "inbound_http_authz_deny_total", `reason="invalid-path"`))
	assert.Positive(t, r.metric(t, "inbound_http_authz_allow_total", `route_kind="httproute"`, `route_name="public"`,
		`authz_kind="authorizationpolicy"`, `authz_name="anyone"`))
	assert.Positive(t, r.metric(t, "request_total", `direction="inbound"`, `route_name="public"`, `authz_name="anyone"`),
		"admitted requests carry the route and authorization that admitted them")
}

func TestInboundHostMatchingIsCaseAndPortInsensitive(t *testing.T) {
	// T08.
	rt := prefixRoute("httpbin", "/")
	rt.Hosts = []authz.HostMatch{{Value: "httpbin.foo"}}
	app := startHTTPApp(t)
	_, addr := plainInbound(t, routedServer(authz.ProtocolHTTP1, rt), app)
	for host, want := range map[string]int{"httpbin.foo": 200, "Httpbin.Foo": 200, "httpbin.foo.": 200, "httpbin.foo:80": 200, "HTTPBIN.FOO:8080": 200, "other.foo": 404, "httpbin.foo.evil": 404} {
		resp, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		assert.Equal(t, want, resp.StatusCode, host)
	}
	resp, _ := rawExchange(t, addr, "GET http://Httpbin.Foo/ HTTP/1.1\r\nHost: other.foo\r\n\r\n")
	assert.Equal(t, 200, resp.StatusCode, "the absolute-form authority is the one authority source")
}

func TestRepeatedHeadersCannotPickAMorePermissiveRoute(t *testing.T) {
	// T09: a route that admits only X-Role: user; a request carrying user
	// and admin (repeated or listed) is refused as ambiguous.
	rt := authz.HTTPRoute{Meta: authz.Meta{Kind: "HTTPRoute", Name: "users"}, Rules: []authz.HTTPRule{{Matches: []authz.HTTPMatch{{
		Path: &authz.PathMatch{Kind: authz.PathPrefix, Value: "/"}, Headers: []authz.ValueMatch{{Name: "X-Role", Exact: "user"}},
	}}}}}
	app := startHTTPApp(t)
	_, addr := plainInbound(t, routedServer(authz.ProtocolHTTP1, rt), app)
	for raw, want := range map[string]int{
		"X-Role: user\r\n":                  200,
		"X-Role: admin\r\n":                 404,
		"X-Role: user,admin\r\n":            400,
		"X-Role: user\r\nX-Role: admin\r\n": 400,
		"x-role: admin\r\nX-ROLE: user\r\n": 400,
	} {
		resp, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: web\r\n"+raw+"\r\n")
		assert.Equal(t, want, resp.StatusCode, "%q", raw)
		if want != 200 {
			assert.NotEmpty(t, resp.Header.Get("Weft-Deny-Reason"))
		}
	}
}

func TestDeniedHTTPGets403WithTheReasonClass(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowOnly(idC)})
	resp, body := get(t, h1Client(), hp.url("/"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, "unauthorized", resp.Header.Get("Weft-Deny-Reason"), "the client proxy passes its peer's explanation on")
	assert.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "unauthorized")
	assert.Contains(t, body, "Forbidden")
	assert.Zero(t, hp.app.requests.Load())
	assert.Equal(t, 1.0, hp.b.metric(t, "inbound_http_authz_deny_total", `reason="unauthorized"`, `client_id="`+idA+`"`, `tls="true"`))
	assert.Equal(t, -1.0, hp.b.metric(t, "request_total", `direction="inbound"`), "a denied request is not an inbound request, as in Linkerd")
}

func TestAuditModeLetsRequestsThroughAndCountsThem(t *testing.T) {
	audit, err := dataplane.DefaultInboundServer(dataplane.AuditAll, nil)
	require.NoError(t, err)
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: audit})
	resp, _ := get(t, h1Client(), hp.url("/"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1.0, hp.b.metric(t, "inbound_http_authz_audit_total", `client_id="`+idA+`"`, `authz_kind="default"`, `authz_name="audit"`))
	assert.Equal(t, -1.0, hp.b.metric(t, "inbound_http_authz_deny_total"))
}

func TestAFirstPolicyTheEvaluatorRefusesDeniesEverything(t *testing.T) {
	// T26: a policy with a matcher this proxy cannot read is never taken
	// as "allow".
	bad := allowAll(t)
	bad.Authorizations[0].Networks = nil
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: bad})
	resp, _ := get(t, h1Client(), hp.url("/"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Zero(t, hp.app.requests.Load())
	assert.Equal(t, 1.0, hp.b.metric(t, "inbound_policy_refused_total"))

	// A good policy applies; a bad update after it keeps the good one.
	hp.policies.Set(uint32(hp.app.port()), allowAll(t))
	testutil.Eventually(t, 5*time.Second, func() bool {
		resp, _ := get(t, h1Client(), hp.url("/"))
		return resp.StatusCode == http.StatusOK
	}, "the good policy applies")
	hp.policies.Set(uint32(hp.app.port()), bad)
	testutil.Eventually(t, 5*time.Second, func() bool { return hp.b.metric(t, "inbound_policy_refused_total") == 2 }, "the bad update is refused")
	resp, _ = get(t, h1Client(), hp.url("/"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the last good policy stays")
}

// startGRPCApp serves the gRPC health service in cleartext HTTP/2.
func startGRPCApp(t testing.TB) (*health.Server, uint16) {
	ln := testutil.Listen(t)
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return hs, uint16(ln.Addr().(*net.TCPAddr).Port)
}

// On both of the server proxy's paths for gRPC (onBothGRPCPaths).
func TestDeniedGRPCGetsPermissionDeniedWithTheReason(t *testing.T) {
	onBothGRPCPaths(t, 2, func(t *testing.T, serverOpts ...dataplane.Option) {
		_, port := startGRPCApp(t)
		pk := newPKI(t)
		pols := dataplane.NewMemoryPolicies()
		grpcServer := authz.ToProto(&authz.Server{Meta: authz.Meta{Kind: "Server", Name: "grpc"}, Protocol: authz.ProtocolGRPC,
			GRPCRoutes: []authz.GRPCRoute{{Meta: authz.Meta{Kind: "GRPCRoute", Name: "health-check"}, Rules: []authz.GRPCRule{{Matches: []authz.GRPCMatch{{Service: "grpc.health.v1.Health", Method: "Check"}}}},
				Authorizations: []authz.Authorization{anyone}}}})
		pols.Set(uint32(port), grpcServer)
		b, client := healthThroughPair(t, pk, pols, port, serverOpts...)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err, "the route admits Check")
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, got.GetStatus())

		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.Error(t, err, "no route admits Watch")
		assert.Equal(t, codes.PermissionDenied, status.Code(err))
		// A trailers-only response: gRPC hands its metadata over as trailers.
		assert.Equal(t, []string{"no-route"}, stream.Trailer().Get("weft-deny-reason"))
		assert.Equal(t, 1.0, b.metric(t, "inbound_http_route_not_found_total"))
		assert.Equal(t, -1.0, b.metric(t, "inbound_http_authz_deny_total"), "a request no route matches is not an authorization denial")
	})
}
