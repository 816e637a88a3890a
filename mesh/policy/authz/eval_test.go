package authz_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

const (
	gatewayID = "api-gateway.my-app.serviceaccount.identity.weft.cluster.local"
	otherID   = "intruder.my-app.serviceaccount.identity.weft.cluster.local"
)

var (
	podIP      = netip.MustParseAddr("10.42.0.7")
	outsideIP  = netip.MustParseAddr("203.0.113.9")
	clusterNet = authz.Network{Net: netip.MustParsePrefix("10.0.0.0/8")}
)

func mustAuthn(t testing.TB, ids ...string) authz.Authentication {
	a, err := authz.NewAuthentication(ids...)
	require.NoError(t, err)
	return a
}

func apMeta(name string) authz.Meta {
	return authz.Meta{Group: "policy.linkerd.io", Kind: "AuthorizationPolicy", Namespace: "my-app", Name: name}
}

func serverMeta(name string) authz.Meta {
	return authz.Meta{Group: "policy.linkerd.io", Kind: "Server", Namespace: "my-app", Name: name}
}

// webServer is the seed example: Server web-http with an
// AuthorizationPolicy that admits only api-gateway.
func webServer(t testing.TB) *authz.Server {
	return &authz.Server{
		Meta:     serverMeta("web-http"),
		Protocol: authz.ProtocolHTTP1,
		Authorizations: []authz.Authorization{{
			Meta:           apMeta("web-api-gateway"),
			Networks:       authz.AllNetworks(),
			Authentication: mustAuthn(t, gatewayID),
		}},
		HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()},
	}
}

func TestEvaluateAllowsOnlyTheListedIdentity(t *testing.T) {
	s := webServer(t)
	res := authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, nil)
	assert.Equal(t, authz.Allow, res.Decision)
	assert.Equal(t, authz.ReasonAuthorized, res.Reason)
	require.NotNil(t, res.Authorization)
	assert.Equal(t, "web-api-gateway", res.Authorization.Meta.Name)

	for _, c := range []authz.Conn{
		{IP: podIP, TLS: true, Identity: otherID},
		{IP: podIP, TLS: false, Identity: gatewayID}, // identity without TLS does not count
		{IP: podIP},
		{IP: podIP, TLS: true},
	} {
		res := authz.Evaluate(s, c, nil)
		assert.Equal(t, authz.Deny, res.Decision, "%+v", c)
		assert.Equal(t, authz.ReasonUnauthorized, res.Reason)
	}
}

func TestEvaluateDeniesEverythingOnAServerWithoutAuthorizations(t *testing.T) {
	s := &authz.Server{Meta: serverMeta("locked"), Protocol: authz.ProtocolOpaque}
	res := authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, nil)
	assert.Equal(t, authz.Deny, res.Decision)
	e := authz.Explain(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, nil)
	assert.Contains(t, e.String(), "no authorization applies")
}

func TestEvaluateChecksNetworksAndTheirExceptions(t *testing.T) {
	n, err := authz.ParseNetwork("10.0.0.0/8", "10.42.0.0/16")
	require.NoError(t, err)
	s := &authz.Server{Meta: serverMeta("s"), Protocol: authz.ProtocolOpaque, Authorizations: []authz.Authorization{{
		Meta: apMeta("nets"), Networks: []authz.Network{n}, Authentication: authz.Authentication{Kind: authz.Unauthenticated},
	}}}
	cases := map[string]authz.Decision{
		"10.1.2.3":         authz.Allow,
		"10.42.0.7":        authz.Deny, // in the exception
		"192.168.1.1":      authz.Deny,
		"::ffff:10.1.2.3":  authz.Allow, // IPv4-mapped IPv6 is compared as IPv4
		"::ffff:10.42.0.1": authz.Deny,
		"fd00::1":          authz.Deny,
	}
	for ip, want := range cases {
		res := authz.Evaluate(s, authz.Conn{IP: netip.MustParseAddr(ip)}, nil)
		assert.Equal(t, want, res.Decision, ip)
	}
	assert.Equal(t, authz.Deny, authz.Evaluate(s, authz.Conn{}, nil).Decision, "an unknown address is in no network")
}

func TestParseNetworkRejectsMalformedCIDRs(t *testing.T) {
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0/8", "fe80::1%eth0/64", "::ffff:10.0.0.0/104", "banana", "10.0.0.0/-1"} {
		_, err := authz.ParseNetwork(bad)
		assert.Error(t, err, bad)
	}
	_, err := authz.ParseNetwork("10.0.0.0/8", "192.168.0.0/16")
	assert.ErrorContains(t, err, "not inside")
	_, err = authz.ParseNetwork("10.0.0.0/16", "10.0.0.0/8")
	assert.ErrorContains(t, err, "not inside")
	_, err = authz.ParseNetwork("10.0.0.0/16", "10.0.0.0/16")
	assert.ErrorContains(t, err, "removes all")
	n, err := authz.ParseNetwork("10.0.0.1/8")
	require.NoError(t, err, "Linkerd accepts host bits and uses the network")
	assert.Equal(t, "10.0.0.0/8", n.Net.String())
	_, err = authz.ParsePrefix("10.0.0.1/8")
	var hb *authz.HostBitsError
	assert.ErrorAs(t, err, &hb)
	n, err = authz.ParseNetwork("10.0.0.7")
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7/32", n.Net.String())
}

func TestParseIdentityRejectsInvalidWildcards(t *testing.T) {
	for _, bad := range []string{"", "web*", "*web.ns", "a.*.b", "**", "*.", "*.*.b", "web..ns", "we b.ns", "*.a..b", "a/b"} {
		_, _, err := authz.ParseIdentity(bad)
		assert.Error(t, err, bad)
	}
	name, suffix, err := authz.ParseIdentity("*.my-app.serviceaccount.identity.weft.cluster.local")
	require.NoError(t, err)
	assert.True(t, suffix)
	assert.Equal(t, "my-app.serviceaccount.identity.weft.cluster.local", name)
}

func TestSuffixesMatchOnLabelBoundaries(t *testing.T) {
	a := mustAuthn(t, "*.my-app.serviceaccount.identity.weft.cluster.local")
	s := &authz.Server{Meta: serverMeta("s"), Protocol: authz.ProtocolOpaque, Authorizations: []authz.Authorization{{
		Meta: apMeta("ns"), Networks: authz.AllNetworks(), Authentication: a,
	}}}
	ok := func(id string) authz.Decision {
		return authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: id}, nil).Decision
	}
	assert.Equal(t, authz.Allow, ok(gatewayID))
	assert.Equal(t, authz.Deny, ok("x.other-my-app.serviceaccount.identity.weft.cluster.local"))
	assert.Equal(t, authz.Deny, ok("evilmy-app.serviceaccount.identity.weft.cluster.local"))
	assert.Equal(t, authz.Deny, ok("my-app.serviceaccount.identity.weft.cluster.local"))

	any := mustAuthn(t, "*")
	s.Authorizations[0].Authentication = any
	assert.Equal(t, authz.Allow, ok(otherID))
	assert.Equal(t, authz.Deny, authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true}, nil).Decision, "* needs an identity")
}

func TestTLSUnauthenticatedAdmitsMeshedClientsWithoutIdentity(t *testing.T) {
	s := &authz.Server{Meta: serverMeta("s"), Protocol: authz.ProtocolOpaque, Authorizations: []authz.Authorization{{
		Meta: apMeta("tls"), Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.TLSUnauthenticated},
	}}}
	assert.Equal(t, authz.Allow, authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true}, nil).Decision)
	assert.Equal(t, authz.Deny, authz.Evaluate(s, authz.Conn{IP: podIP}, nil).Decision)
}

func TestAuditAllowsAndReportsOnlyWhatNothingElseAllows(t *testing.T) {
	s := webServer(t)
	s.Authorizations = append([]authz.Authorization{{
		Meta: authz.DefaultMeta("audit"), Audit: true, Networks: authz.AllNetworks(),
		Authentication: authz.Authentication{Kind: authz.Unauthenticated},
	}}, s.Authorizations...)
	res := authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, nil)
	assert.Equal(t, authz.Allow, res.Decision, "a real authorization wins over audit even when listed later")
	res = authz.Evaluate(s, authz.Conn{IP: podIP}, nil)
	assert.Equal(t, authz.Audit, res.Decision)
	assert.Equal(t, authz.ReasonAudited, res.Reason)
	e := authz.Explain(s, authz.Conn{IP: podIP}, nil)
	assert.Contains(t, e.String(), "web-api-gateway does not apply")
	assert.Contains(t, e.String(), "audit mode")
}

// routedServer has an exact /admin route for the gateway only, a /public
// prefix route for anyone, and a header-selected route.
func routedServer(t testing.TB) *authz.Server {
	anyone := authz.Authorization{Meta: apMeta("public"), Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}
	gw := authz.Authorization{Meta: apMeta("admins"), Networks: authz.AllNetworks(), Authentication: mustAuthn(t, gatewayID)}
	re, err := authz.CompileAnchored(`/items/[0-9]+`)
	require.NoError(t, err)
	route := func(name string, m authz.HTTPMatch, a authz.Authorization) authz.HTTPRoute {
		return authz.HTTPRoute{
			Meta:           authz.Meta{Group: "policy.linkerd.io", Kind: "HTTPRoute", Namespace: "my-app", Name: name},
			Rules:          []authz.HTTPRule{{Matches: []authz.HTTPMatch{m}}},
			Authorizations: []authz.Authorization{a},
		}
	}
	return &authz.Server{
		Meta: serverMeta("web-http"), Protocol: authz.ProtocolHTTP1,
		HTTPRoutes: []authz.HTTPRoute{
			route("admin", authz.HTTPMatch{Path: &authz.PathMatch{Kind: authz.PathExact, Value: "/admin"}}, gw),
			route("public", authz.HTTPMatch{Path: &authz.PathMatch{Kind: authz.PathPrefix, Value: "/public"}}, anyone),
			route("items", authz.HTTPMatch{Method: "GET", Path: &authz.PathMatch{Kind: authz.PathRegex, Value: `/items/[0-9]+`, Regex: re}}, anyone),
			route("role-admin", authz.HTTPMatch{
				Path:    &authz.PathMatch{Kind: authz.PathPrefix, Value: "/"},
				Headers: []authz.ValueMatch{{Name: "X-Role", Exact: "admin"}},
			}, gw),
			route("everything", authz.HTTPMatch{Path: &authz.PathMatch{Kind: authz.PathPrefix, Value: "/"}}, anyone),
		},
	}
}

func req(method, path string, hdr ...string) *authz.Request {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Add(hdr[i], hdr[i+1])
	}
	return &authz.Request{Method: method, Path: path, Host: "web.my-app.svc.cluster.local:8080", Header: h}
}

func TestPathTricksCannotReachAdminRoute(t *testing.T) {
	s := routedServer(t)
	anon := authz.Conn{IP: podIP}
	for _, p := range []string{"/admin", "/public/../admin", "//admin", "/%2e%2e/admin", "/%61dmin", "/./admin", "/public/%2E%2E/admin"} {
		res := authz.Evaluate(s, anon, req("GET", p))
		assert.Equal(t, authz.Deny, res.Decision, p)
		assert.Equal(t, authz.ReasonUnauthorized, res.Reason, p)
		if m, ok := res.Route(); assert.True(t, ok, p) {
			assert.Equal(t, "admin", m.Name, p)
		}
		assert.Equal(t, "/admin", res.Path, p)
	}
	for _, p := range []string{"/admin%2F", "/..;/admin", "/admin#f", "/admin%00", "/a\\admin", "/public/..;x/admin"} {
		res := authz.Evaluate(s, anon, req("GET", p))
		assert.Equal(t, authz.Deny, res.Decision, p)
		assert.Equal(t, authz.ReasonInvalidPath, res.Reason, p)
	}
	res := authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, req("GET", "/public/../admin"))
	assert.Equal(t, authz.Allow, res.Decision)
}

func TestRoutePrecedenceFollowsMatchSpecificity(t *testing.T) {
	s := routedServer(t)
	anon := authz.Conn{IP: podIP}
	cases := []struct{ method, path, route string }{
		{"GET", "/public", "public"},
		{"GET", "/public/", "public"},
		{"GET", "/public/x/y", "public"},
		{"GET", "/publicity", "everything"},
		{"GET", "/items/42", "items"},
		{"POST", "/items/42", "everything"},
		{"GET", "/items/42/x", "everything"},
		{"GET", "/admin/x", "everything"},
		{"GET", "/admin?x=1", "admin"},
	}
	for _, c := range cases {
		res := authz.Evaluate(s, anon, req(c.method, c.path))
		m, ok := res.Route()
		if assert.True(t, ok, c.path) {
			assert.Equal(t, c.route, m.Name, "%s %s", c.method, c.path)
		}
	}
}

func TestRepeatedHeaderValuesThatDisagreeAreDenied(t *testing.T) {
	s := routedServer(t)
	anon := authz.Conn{IP: podIP}
	gw := authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}

	res := authz.Evaluate(s, anon, req("GET", "/x", "X-Role", "admin"))
	assert.Equal(t, authz.Deny, res.Decision)
	assert.Equal(t, authz.ReasonUnauthorized, res.Reason)

	res = authz.Evaluate(s, gw, req("GET", "/x", "X-Role", "admin"))
	assert.Equal(t, authz.Allow, res.Decision)

	for _, hdr := range [][]string{
		{"X-Role", "user", "X-Role", "admin"},
		{"X-Role", "user,admin"},
		{"x-role", "admin", "X-ROLE", "user"},
		{"X-Role", "admin , user"},
	} {
		res := authz.Evaluate(s, gw, req("GET", "/x", hdr...))
		assert.Equal(t, authz.Deny, res.Decision, hdr)
		assert.Equal(t, authz.ReasonAmbiguousRequest, res.Reason, hdr)
	}

	res = authz.Evaluate(s, gw, req("GET", "/x", "X-Role", "admin", "X-Role", "admin"))
	assert.Equal(t, authz.Allow, res.Decision, "repeated values that agree are fine")
	res = authz.Evaluate(s, anon, req("GET", "/x", "X-Role", "user", "X-Role", "guest"))
	assert.Equal(t, authz.Allow, res.Decision, "values that all miss the match fall through to other routes")
}

func TestNoMatchingRouteIsDenied(t *testing.T) {
	s := routedServer(t)
	s.HTTPRoutes = s.HTTPRoutes[:2]
	res := authz.Evaluate(s, authz.Conn{IP: podIP}, req("GET", "/elsewhere"))
	assert.Equal(t, authz.Deny, res.Decision)
	assert.Equal(t, authz.ReasonNoRoute, res.Reason)
}

func TestHostMatchingIsCaseInsensitiveAndIgnoresPortAndTrailingDot(t *testing.T) {
	anyone := authz.Authorization{Meta: apMeta("a"), Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}
	s := &authz.Server{Meta: serverMeta("s"), Protocol: authz.ProtocolHTTP1, HTTPRoutes: []authz.HTTPRoute{{
		Meta:  authz.Meta{Kind: "HTTPRoute", Name: "exact"},
		Hosts: []authz.HostMatch{{Value: "httpbin.foo"}},
		Rules: []authz.HTTPRule{{}}, Authorizations: []authz.Authorization{anyone},
	}, {
		Meta:  authz.Meta{Kind: "HTTPRoute", Name: "wild"},
		Hosts: []authz.HostMatch{{Value: "example.com", Suffix: true}},
		Rules: []authz.HTTPRule{{}}, Authorizations: []authz.Authorization{anyone},
	}}}
	for host, want := range map[string]string{
		"httpbin.foo": "exact", "Httpbin.Foo": "exact", "httpbin.foo.": "exact", "httpbin.foo:80": "exact",
		"a.example.com": "wild", "A.B.Example.COM:443": "wild",
	} {
		res := authz.Evaluate(s, authz.Conn{IP: podIP}, &authz.Request{Method: "GET", Path: "/", Host: host})
		m, ok := res.Route()
		if assert.True(t, ok, host) {
			assert.Equal(t, want, m.Name, host)
		}
	}
	for _, host := range []string{"example.com", "httpbin.foo.evil", "[::1]:80"} {
		res := authz.Evaluate(s, authz.Conn{IP: podIP}, &authz.Request{Method: "GET", Path: "/", Host: host})
		assert.Equal(t, authz.ReasonNoRoute, res.Reason, host)
	}
}

func TestGRPCRoutesMatchServiceAndMethod(t *testing.T) {
	gw := authz.Authorization{Meta: apMeta("gw"), Networks: authz.AllNetworks(), Authentication: mustAuthn(t, gatewayID)}
	anyone := authz.Authorization{Meta: apMeta("any"), Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}
	s := &authz.Server{Meta: serverMeta("grpc"), Protocol: authz.ProtocolGRPC, GRPCRoutes: []authz.GRPCRoute{
		{Meta: authz.Meta{Kind: "GRPCRoute", Name: "delete"}, Rules: []authz.GRPCRule{{Matches: []authz.GRPCMatch{{Service: "shop.Items", Method: "Delete"}}}}, Authorizations: []authz.Authorization{gw}},
		{Meta: authz.Meta{Kind: "GRPCRoute", Name: "items"}, Rules: []authz.GRPCRule{{Matches: []authz.GRPCMatch{{Service: "shop.Items"}}}}, Authorizations: []authz.Authorization{anyone}},
	}}
	anon := authz.Conn{IP: podIP}
	assert.Equal(t, authz.Allow, authz.Evaluate(s, anon, req("POST", "/shop.Items/Get")).Decision)
	assert.Equal(t, authz.Deny, authz.Evaluate(s, anon, req("POST", "/shop.Items/Delete")).Decision)
	assert.Equal(t, authz.ReasonNoRoute, authz.Evaluate(s, anon, req("POST", "/shop.Other/Get")).Reason)
	assert.Equal(t, authz.Allow, authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, req("POST", "/shop.Items/Delete")).Decision)
}

func TestRequestsOnOpaquePortsAreEvaluatedAsConnections(t *testing.T) {
	s := webServer(t)
	s.Protocol = authz.ProtocolOpaque
	s.HTTPRoutes = nil
	res := authz.Evaluate(s, authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}, req("GET", "/%2F"))
	assert.Equal(t, authz.Allow, res.Decision)
	assert.Empty(t, res.Path)
}

func TestExplainAgreesWithEvaluate(t *testing.T) {
	s := routedServer(t)
	conns := []authz.Conn{{IP: podIP}, {IP: podIP, TLS: true, Identity: gatewayID}, {IP: outsideIP, TLS: true}}
	reqs := []*authz.Request{nil, req("GET", "/admin"), req("GET", "/public/x"), req("GET", "/x", "X-Role", "a,b"), req("GET", "/%2F")}
	for _, c := range conns {
		for _, r := range reqs {
			ev := authz.Evaluate(s, c, r)
			ex := authz.Explain(s, c, r)
			assert.Equal(t, ev, ex.Result)
			assert.NotEmpty(t, ex.Steps)
		}
	}
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	s := routedServer(t)
	c := authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}
	ws := webServer(t)
	assert.Zero(t, testing.AllocsPerRun(200, func() { authz.Evaluate(ws, c, nil) }), "connection")
	r := req("GET", "/public/items", "X-Role", "user")
	assert.Zero(t, testing.AllocsPerRun(200, func() { authz.Evaluate(s, c, r) }), "request")
}

func TestProtoRoundTripKeepsDecisions(t *testing.T) {
	s := routedServer(t)
	s.Authorizations = []authz.Authorization{{
		Meta: authz.DefaultMeta("audit"), Audit: true, Networks: authz.AllNetworks(),
		Authentication: authz.Authentication{Kind: authz.Unauthenticated},
	}, {
		Meta: apMeta("ns"), Networks: []authz.Network{clusterNet}, Authentication: mustAuthn(t, "*.my-app.serviceaccount.identity.weft.cluster.local", "*"),
	}}
	msg := authz.ToProto(s)
	raw, err := proto.Marshal(msg)
	require.NoError(t, err)
	var decoded = msg.ProtoReflect().New().Interface()
	require.NoError(t, proto.Unmarshal(raw, decoded))
	back, err := authz.FromProto(msg)
	require.NoError(t, err)

	conns := []authz.Conn{{IP: podIP}, {IP: outsideIP}, {IP: podIP, TLS: true, Identity: gatewayID}, {IP: outsideIP, TLS: true, Identity: otherID}}
	paths := []string{"/admin", "/public/a", "/items/1", "/x", "/%2e%2e/admin", "/admin%2f"}
	for _, c := range conns {
		a, b := authz.Evaluate(s, c, nil), authz.Evaluate(back, c, nil)
		assert.Equal(t, a.Decision, b.Decision)
		for _, p := range paths {
			for _, hdr := range [][]string{nil, {"X-Role", "admin"}} {
				a, b := authz.Evaluate(s, c, req("GET", p, hdr...)), authz.Evaluate(back, c, req("GET", p, hdr...))
				assert.Equal(t, a.Decision, b.Decision, "%v %s", c, p)
				assert.Equal(t, a.Reason, b.Reason, "%v %s", c, p)
				am, _ := a.Route()
				bm, _ := b.Route()
				assert.Equal(t, am.Name, bm.Name)
			}
		}
	}
	assert.Equal(t, "server", msg.Labels["kind"])
	assert.Equal(t, "web-http", msg.Labels["name"])
	assert.Equal(t, "audit", msg.Authorizations[0].GetMetadata().GetDefault())
	assert.Equal(t, "authorizationpolicy", msg.Authorizations[1].GetMetadata().GetResource().GetKind())
}

func TestFromProtoRejectsWhatItCannotFullyUnderstand(t *testing.T) {
	base := func() *authz.Server { return routedServer(t) }

	msg := authz.ToProto(webServer(t))
	msg.Authorizations[0].Networks = nil
	_, err := authz.FromProto(msg)
	assert.ErrorContains(t, err, "no networks", "an authorization without networks must not mean everyone")

	msg = authz.ToProto(webServer(t))
	msg.Authorizations[0].Authentication = nil
	_, err = authz.FromProto(msg)
	assert.ErrorContains(t, err, "missing authentication")

	msg = authz.ToProto(webServer(t))
	msg.Protocol = nil
	_, err = authz.FromProto(msg)
	assert.ErrorContains(t, err, "missing protocol")

	msg = authz.ToProto(base())
	msg.GetProtocol().GetHttp1().Routes[0].Rules[0].Matches[0].Path.Kind = nil
	_, err = authz.FromProto(msg)
	assert.ErrorContains(t, err, "path match without a value")

	msg = authz.ToProto(base())
	hm := msg.GetProtocol().GetHttp1().Routes[3].Rules[0].Matches[0].Headers[0]
	hm.Value = nil
	_, err = authz.FromProto(msg)
	assert.ErrorContains(t, err, "without a value")

	// A field from a newer schema inside a route match (field 99, varint 1).
	msg = authz.ToProto(base())
	m := msg.GetProtocol().GetHttp1().Routes[0].Rules[0].Matches[0]
	m.ProtoReflect().SetUnknown([]byte{0x98, 0x06, 0x01})
	_, err = authz.FromProto(msg)
	assert.ErrorContains(t, err, "does not understand")

	msg = authz.ToProto(base())
	msg.GetProtocol().GetHttp1().Routes[0].Rules[0].Matches[0].Path.Kind = nil
	msg.GetProtocol().GetHttp1().Routes[0].Rules[0].Matches[0].Path = nil
	msg.GetProtocol().GetHttp1().Routes[0].Rules[0].Matches[0].Headers = nil
	_, err = authz.FromProto(msg)
	require.NoError(t, err, "a match without conditions is a catch-all route, not an authorization")
}

func FuzzDecisionOnRawPathEqualsDecisionOnNormalizedPath(f *testing.F) {
	for _, p := range []string{"/admin", "/public/../admin", "//admin", "/%2e%2e/admin", "/admin%2F", "/..;/admin", "/items/42", "/public/x/../../admin/", "/%252e"} {
		f.Add(p, false)
		f.Add(p, true)
	}
	s := routedServer(f)
	f.Fuzz(func(t *testing.T, raw string, gateway bool) {
		c := authz.Conn{IP: podIP}
		if gateway {
			c = authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}
		}
		if strings.ContainsAny(raw, "?#") {
			return // the query and fragment are not part of the path
		}
		a := authz.Evaluate(s, c, req("GET", raw))
		norm, err := pathnorm.Normalize(raw)
		if err != nil {
			if a.Decision != authz.Deny || a.Reason != authz.ReasonInvalidPath {
				t.Fatalf("path %q refused by the normalizer but decided %s (%s)", raw, a.Decision, a.Reason)
			}
			return
		}
		b := authz.Evaluate(s, c, req("GET", norm))
		if a.Decision != b.Decision || a.Reason != b.Reason || a.Path != b.Path {
			t.Fatalf("raw %q: %s/%s, normalized %q: %s/%s", raw, a.Decision, a.Reason, norm, b.Decision, b.Reason)
		}
		am, _ := a.Route()
		bm, _ := b.Route()
		if am != bm {
			t.Fatalf("raw %q chose route %s, normalized %q chose %s", raw, am, norm, bm)
		}
	})
}

// BenchmarkEvaluate is the proxy's per-connection and per-request cost:
// the port's policy is already at hand.
func BenchmarkEvaluate(b *testing.B) {
	s := routedServer(b)
	ws := webServer(b)
	c := authz.Conn{IP: podIP, TLS: true, Identity: gatewayID}
	b.Run("connection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			authz.Evaluate(ws, c, nil)
		}
	})
	r := req("GET", "/items/42")
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			authz.Evaluate(s, c, r)
		}
	})
}
