package routematch_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// A case describes routes once, in a form of its own, and builds them
// for both directions: the outbound router (from the proxy API's
// OutboundPolicy, as the control plane sends it) and the inbound
// evaluator (an authz.Server).
type (
	tRoute struct {
		name  string
		hosts []string // "*.example.com" for a wildcard
		rules [][]tMatch
	}
	tMatch struct {
		exact, prefix, regex string
		method               string
		headers, query       [][2]string
		service, rpc         string // gRPC
	}
	tCase struct {
		name   string
		grpc   bool
		routes []tRoute
		method string
		target string // path and query
		host   string
		header http.Header
		want   string // "" when no route applies
	}
)

// one is a route with a single rule holding the given matches.
func one(name string, ms ...tMatch) tRoute { return tRoute{name: name, rules: [][]tMatch{ms}} }

func hosted(hosts []string, r tRoute) tRoute { r.hosts = hosts; return r }

func cases() []tCase {
	return []tCase{
		// Linkerd's own cases (linkerd/http/route, src/http/tests.rs and
		// src/grpc/tests.rs at release/v2.366.0), with data of our own.
		{name: "http/hostname_precedence", routes: []tRoute{
			hosted([]string{"*.shop.test"}, one("wildcard", tMatch{exact: "/cart"})),
			hosted([]string{"api.shop.test"}, one("named", tMatch{exact: "/cart"})),
		}, target: "/cart", host: "api.shop.test", want: "named"},
		{name: "http/path_length_precedence", routes: []tRoute{
			one("short-prefix", tMatch{prefix: "/cart"}),
			one("long-exact", tMatch{exact: "/cart/items"}),
		}, target: "/cart/items", want: "long-exact"},
		{name: "http/header_count_precedence", routes: []tRoute{
			one("two", tMatch{headers: [][2]string{{"x-tenant", "blue"}, {"x-tier", "gold"}}}),
			one("three", tMatch{headers: [][2]string{{"x-tenant", "blue"}, {"x-tier", "gold"}, {"x-region", "eu"}}}),
		}, target: "/", header: http.Header{"X-Tenant": {"blue"}, "X-Tier": {"gold"}, "X-Region": {"eu"}}, want: "three"},
		{name: "http/first_identical_wins", routes: []tRoute{
			{name: "first", rules: [][]tMatch{nil, nil}},
			{name: "second", rules: [][]tMatch{nil}},
		}, target: "/anything", want: "first"},
		{name: "grpc/default", grpc: true, routes: []tRoute{one("empty", tMatch{})}, target: "/shop.Cart/Add", want: "empty"},
		{name: "grpc/hostname_precedence", grpc: true, routes: []tRoute{
			hosted([]string{"*.shop.test"}, one("wildcard", tMatch{service: "shop.Cart", rpc: "Add"})),
			hosted([]string{"api.shop.test"}, one("named", tMatch{service: "shop.Cart", rpc: "Add"})),
		}, target: "/shop.Cart/Add", host: "api.shop.test", want: "named"},
		{name: "grpc/method_precedence", grpc: true, routes: []tRoute{
			one("service", tMatch{service: "shop.Cart"}),
			one("service-and-method", tMatch{service: "shop.Cart", rpc: "Add"}),
		}, target: "/shop.Cart/Add", want: "service-and-method"},
		{name: "grpc/header_count_precedence", grpc: true, routes: []tRoute{
			one("two", tMatch{headers: [][2]string{{"x-tenant", "blue"}, {"x-tier", "gold"}}}),
			one("three", tMatch{headers: [][2]string{{"x-tenant", "blue"}, {"x-tier", "gold"}, {"x-region", "eu"}}}),
		}, target: "/shop.Cart/Add", header: http.Header{"X-Tenant": {"blue"}, "X-Tier": {"gold"}, "X-Region": {"eu"}}, want: "three"},
		{name: "grpc/first_identical_wins", grpc: true, routes: []tRoute{
			{name: "first", rules: [][]tMatch{nil, nil}},
			{name: "second", rules: [][]tMatch{nil}},
		}, target: "/shop.Cart/Add", want: "first"},

		// Path kinds.
		{name: "a regex matching the whole path outranks a shorter prefix", routes: []tRoute{
			one("prefix", tMatch{prefix: "/items/v1"}),
			one("regex", tMatch{regex: "/items/.*"}),
		}, target: "/items/v1/42", want: "regex"},
		{name: "a regex counts the request path's length, not its own", routes: []tRoute{
			one("short-regex", tMatch{regex: "/items/[0-9]+"}),
			one("long-regex", tMatch{regex: "/items/(?:[0-9]+|latest|oldest)"}),
		}, target: "/items/42", want: "short-regex"},
		{name: "a regex beats a prefix of the same length", routes: []tRoute{
			one("prefix", tMatch{prefix: "/items/42"}),
			one("regex", tMatch{regex: "/items/[0-9]+"}),
		}, target: "/items/42", want: "regex"},
		{name: "an exact path beats a prefix of the same length listed first", routes: []tRoute{
			one("prefix", tMatch{prefix: "/login"}),
			one("exact", tMatch{exact: "/login"}),
		}, target: "/login", want: "exact"},
		{name: "a prefix holds for whole segments only", routes: []tRoute{
			one("root", tMatch{prefix: "/"}),
			one("cart", tMatch{prefix: "/cart/"}),
		}, target: "/cartography", want: "root"},

		// Conditions.
		{name: "a method outranks more headers", routes: []tRoute{
			one("canary", tMatch{prefix: "/api", headers: [][2]string{{"x-canary", "1"}}}),
			one("get", tMatch{prefix: "/api", method: "GET"}),
		}, method: "GET", target: "/api/x", header: http.Header{"X-Canary": {"1"}}, want: "get"},
		{name: "headers outrank query parameters", routes: []tRoute{
			one("query", tMatch{query: [][2]string{{"v", "2"}, {"debug", "1"}}}),
			one("header", tMatch{headers: [][2]string{{"x-v", "2"}}}),
		}, target: "/?v=2&debug=1", header: http.Header{"X-V": {"2"}}, want: "header"},
		{name: "more query parameters win", routes: []tRoute{
			one("one", tMatch{query: [][2]string{{"v", "2"}}}),
			one("two", tMatch{query: [][2]string{{"v", "2"}, {"debug", "1"}}}),
		}, target: "/?v=2&debug=1", want: "two"},
		{name: "the path outranks a method", routes: []tRoute{
			one("get", tMatch{prefix: "/api", method: "GET"}),
			one("longer", tMatch{prefix: "/api/v1"}),
		}, method: "GET", target: "/api/v1/x", want: "longer"},

		// gRPC.
		{name: "grpc: a match without service or method needs a /service/method path", grpc: true, routes: []tRoute{
			one("empty", tMatch{}),
		}, target: "/health", want: ""},
		{name: "grpc: a route without service or method loses to one naming the service", grpc: true, routes: []tRoute{
			one("empty", tMatch{}),
			one("service", tMatch{service: "shop.Cart"}),
		}, target: "/shop.Cart/Add", want: "service"},
		{name: "grpc: the service outranks the method alone", grpc: true, routes: []tRoute{
			one("method", tMatch{rpc: "Add"}),
			one("service", tMatch{service: "shop.Cart"}),
		}, target: "/shop.Cart/Add", want: "service"},
		{name: "grpc: service and method outrank a header", grpc: true, routes: []tRoute{
			one("header", tMatch{service: "shop.Cart", headers: [][2]string{{"x-tenant", "blue"}}}),
			one("method", tMatch{service: "shop.Cart", rpc: "Add"}),
		}, target: "/shop.Cart/Add", header: http.Header{"X-Tenant": {"blue"}}, want: "method"},
		{name: "grpc: a match holds only for POST", grpc: true, routes: []tRoute{
			one("service", tMatch{service: "shop.Cart"}),
		}, method: "GET", target: "/shop.Cart/Add", want: ""},
		{name: "grpc: a rule without matches holds for any call", grpc: true, routes: []tRoute{
			{name: "any", rules: [][]tMatch{nil}},
		}, target: "/health", want: "any"},

		// Hostnames.
		{name: "a longer wildcard beats a shorter one", routes: []tRoute{
			hosted([]string{"*.test"}, one("short")),
			hosted([]string{"*.shop.test"}, one("long")),
		}, target: "/", host: "api.shop.test", want: "long"},
		{name: "hosts compare without case, port or trailing dot", routes: []tRoute{
			hosted([]string{"*.shop.test"}, one("wildcard")),
			hosted([]string{"api.shop.test"}, one("named")),
		}, target: "/", host: "API.Shop.Test.:8080", want: "named"},
		{name: "a route listing a matching host beats one listing none, whatever the path", routes: []tRoute{
			one("no-hosts", tMatch{exact: "/cart/items"}),
			hosted([]string{"api.shop.test"}, one("hosted", tMatch{prefix: "/"})),
		}, target: "/cart/items", host: "api.shop.test", want: "hosted"},
		{name: "a wildcard does not match its own base name", routes: []tRoute{
			hosted([]string{"*.shop.test"}, one("wildcard")),
		}, target: "/", host: "shop.test", want: ""},
	}
}

// TestBothDirectionsPickTheSameRoute runs every case through the outbound
// router and the inbound evaluator: both must pick the expected route.
func TestBothDirectionsPickTheSameRoute(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			if c.method == "" {
				c.method = "GET"
				if c.grpc {
					c.method = "POST"
				}
			}
			if c.host == "" {
				c.host = "web.shop.test"
			}
			assert.Equal(t, c.want, outboundPick(t, c), "outbound router")
			assert.Equal(t, c.want, inboundPick(t, c), "inbound evaluator")
		})
	}
}

func outboundPick(t *testing.T, c tCase) string {
	const target = "web.shop.test:80"
	var pol *outbound.OutboundPolicy
	if c.grpc {
		var rs []*outbound.GrpcRoute
		for _, r := range c.routes {
			or := &outbound.GrpcRoute{Metadata: md("GRPCRoute", r.name), Hosts: hostsOf(r.hosts)}
			for _, ms := range r.rules {
				rule := &outbound.GrpcRoute_Rule{}
				for _, m := range ms {
					rule.Matches = append(rule.Matches, &grpcroute.GrpcRouteMatch{Rpc: &grpcroute.GrpcRpcMatch{Service: m.service, Method: m.rpc}, Headers: headersOf(m.headers)})
				}
				or.Rules = append(or.Rules, rule)
			}
			rs = append(rs, or)
		}
		pol = &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{Routes: rs}}}}
	} else {
		var rs []*outbound.HttpRoute
		for _, r := range c.routes {
			or := &outbound.HttpRoute{Metadata: md("HTTPRoute", r.name), Hosts: hostsOf(r.hosts)}
			for _, ms := range r.rules {
				rule := &outbound.HttpRoute_Rule{}
				for _, m := range ms {
					rule.Matches = append(rule.Matches, httpMatchOf(m))
				}
				or.Rules = append(or.Rules, rule)
			}
			rs = append(rs, or)
		}
		pol = &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Http1_{Http1: &outbound.ProxyProtocol_Http1{Routes: rs}}}}
	}
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	path, query, _ := strings.Cut(c.target, "?")
	host := c.host
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i] // the proxy passes the authority without its port
	}
	rt := r.Select(route.Request{Method: c.method, Path: path, RawQuery: query, Host: host, Header: c.header, GRPC: c.grpc, HTTP2: c.grpc})
	if route.NotFound(rt) {
		return ""
	}
	return strings.TrimPrefix(strings.TrimPrefix(rt.Name, "httproute/shop/"), "grpcroute/shop/")
}

func md(kind, name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: kind, Namespace: "shop", Name: name}}}
}

func hostsOf(hs []string) []*httproute.HostMatch {
	var out []*httproute.HostMatch
	for _, h := range hs {
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			labels := strings.Split(rest, ".")
			var rev []string
			for i := len(labels) - 1; i >= 0; i-- {
				rev = append(rev, labels[i])
			}
			out = append(out, &httproute.HostMatch{Match: &httproute.HostMatch_Suffix_{Suffix: &httproute.HostMatch_Suffix{ReverseLabels: rev}}})
		} else {
			out = append(out, &httproute.HostMatch{Match: &httproute.HostMatch_Exact{Exact: h}})
		}
	}
	return out
}

func headersOf(hs [][2]string) []*httproute.HeaderMatch {
	var out []*httproute.HeaderMatch
	for _, h := range hs {
		out = append(out, &httproute.HeaderMatch{Name: h[0], Value: &httproute.HeaderMatch_Exact{Exact: []byte(h[1])}})
	}
	return out
}

func httpMatchOf(m tMatch) *httproute.HttpRouteMatch {
	out := &httproute.HttpRouteMatch{Headers: headersOf(m.headers)}
	switch {
	case m.exact != "":
		out.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: m.exact}}
	case m.prefix != "":
		out.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: m.prefix}}
	case m.regex != "":
		out.Path = &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: m.regex}}
	}
	if m.method != "" {
		out.Method = &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Unregistered{Unregistered: m.method}}
	}
	for _, q := range m.query {
		out.QueryParams = append(out.QueryParams, &httproute.QueryParamMatch{Name: q[0], Value: &httproute.QueryParamMatch_Exact{Exact: q[1]}})
	}
	return out
}

func inboundPick(t *testing.T, c tCase) string {
	s := &authz.Server{
		Meta:           authz.Meta{Kind: "Server", Namespace: "shop", Name: "web"},
		Protocol:       authz.ProtocolHTTP1,
		Authorizations: []authz.Authorization{{Meta: authz.Meta{Kind: "AuthorizationPolicy", Namespace: "shop", Name: "all"}, Networks: authz.AllNetworks(), Authentication: authz.Authentication{Kind: authz.Unauthenticated}}},
	}
	if c.grpc {
		s.Protocol = authz.ProtocolGRPC
	}
	for _, r := range c.routes {
		rm := authz.Meta{Kind: "HTTPRoute", Namespace: "shop", Name: r.name}
		if c.grpc {
			gr := authz.GRPCRoute{Meta: rm, Hosts: authzHosts(r.hosts)}
			for _, ms := range r.rules {
				var rule authz.GRPCRule
				for _, m := range ms {
					rule.Matches = append(rule.Matches, authz.GRPCMatch{Service: m.service, Method: m.rpc, Headers: authzValues(m.headers, true)})
				}
				gr.Rules = append(gr.Rules, rule)
			}
			s.GRPCRoutes = append(s.GRPCRoutes, gr)
			continue
		}
		hr := authz.HTTPRoute{Meta: rm, Hosts: authzHosts(r.hosts)}
		for _, ms := range r.rules {
			var rule authz.HTTPRule
			for _, m := range ms {
				am := authz.HTTPMatch{Method: m.method, Headers: authzValues(m.headers, true), Query: authzValues(m.query, false)}
				switch {
				case m.exact != "":
					am.Path = &authz.PathMatch{Kind: authz.PathExact, Value: m.exact}
				case m.prefix != "":
					am.Path = &authz.PathMatch{Kind: authz.PathPrefix, Value: m.prefix}
				case m.regex != "":
					re, err := authz.CompileAnchored(m.regex)
					require.NoError(t, err)
					am.Path = &authz.PathMatch{Kind: authz.PathRegex, Value: m.regex, Regex: re}
				}
				rule.Matches = append(rule.Matches, am)
			}
			hr.Rules = append(hr.Rules, rule)
		}
		s.HTTPRoutes = append(s.HTTPRoutes, hr)
	}
	require.NoError(t, s.Validate())
	res := authz.Evaluate(s, authz.Conn{IP: netip.MustParseAddr("10.42.0.9")}, &authz.Request{Method: c.method, Path: c.target, Host: c.host, Header: c.header})
	if m, ok := res.Route(); ok {
		return m.Name
	}
	return ""
}

func authzHosts(hs []string) []authz.HostMatch {
	var out []authz.HostMatch
	for _, h := range hs {
		if rest, ok := strings.CutPrefix(h, "*."); ok {
			out = append(out, authz.HostMatch{Value: rest, Suffix: true})
		} else {
			out = append(out, authz.HostMatch{Value: h})
		}
	}
	return out
}

func authzValues(vs [][2]string, header bool) []authz.ValueMatch {
	var out []authz.ValueMatch
	for _, v := range vs {
		name := v[0]
		if header {
			name = http.CanonicalHeaderKey(name)
		}
		out = append(out, authz.ValueMatch{Name: name, Exact: v[1]})
	}
	return out
}
