package route_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

const target = "web.shop.svc.cluster.local:80"

func md(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "HTTPRoute", Namespace: "shop", Name: name}}}
}

func prefix(p string) *httproute.HttpRouteMatch {
	return &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: p}}}
}

func exact(p string) *httproute.HttpRouteMatch {
	return &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Exact{Exact: p}}}
}

func balancer(authority string) *outbound.Backend {
	return &outbound.Backend{Metadata: md(authority), Kind: &outbound.Backend_Balancer{Balancer: &outbound.Backend_BalanceP2C{
		Discovery: &outbound.Backend_EndpointDiscovery{Kind: &outbound.Backend_EndpointDiscovery_Dst{Dst: &outbound.Backend_EndpointDiscovery_DestinationGet{Path: authority}}},
	}}}
}

func weighted(bs map[string]uint32) *outbound.HttpRoute_Distribution {
	d := &outbound.HttpRoute_Distribution_RandomAvailable{}
	for a, w := range bs {
		d.Backends = append(d.Backends, &outbound.HttpRoute_WeightedRouteBackend{Backend: &outbound.HttpRoute_RouteBackend{Backend: balancer(a)}, Weight: w})
	}
	return &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_RandomAvailable_{RandomAvailable: d}}
}

func httpPolicy(routes ...*outbound.HttpRoute) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: durationpb.New(10 * time.Second),
		Http1:   &outbound.ProxyProtocol_Http1{Routes: routes},
		Http2:   &outbound.ProxyProtocol_Http2{Routes: routes},
	}}}}
}

func rule(matches []*httproute.HttpRouteMatch, filters ...*outbound.HttpRoute_Filter) *outbound.HttpRoute_Rule {
	return &outbound.HttpRoute_Rule{Matches: matches, Filters: filters}
}

func req(method, path string) route.Request {
	return route.Request{Method: method, Path: path, Host: "web.shop.svc.cluster.local", Header: http.Header{}}
}

func TestWithoutPolicyEverythingGoesToTheTarget(t *testing.T) {
	r, err := route.Compile(nil, nil, target)
	require.NoError(t, err)
	rt := r.Select(req("GET", "/any"))
	assert.Equal(t, "default", rt.Name)
	require.Len(t, rt.Backends, 1)
	assert.Equal(t, target, rt.Backends[0].Authority)
	assert.Nil(t, rt.Retry)
	assert.Equal(t, route.Timeouts{}, rt.Timeouts)
}

func TestTheMostSpecificRuleWins(t *testing.T) {
	methodGet := &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/api"}}, Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}}
	withHeader := &httproute.HttpRouteMatch{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/api"}}, Headers: []*httproute.HeaderMatch{{Name: "x-canary", Value: &httproute.HeaderMatch_Exact{Exact: []byte("1")}}}}
	pol := httpPolicy(
		&outbound.HttpRoute{Metadata: md("root"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/")})}},
		&outbound.HttpRoute{Metadata: md("api"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/api")})}},
		&outbound.HttpRoute{Metadata: md("api-v1"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{prefix("/api/v1")})}},
		&outbound.HttpRoute{Metadata: md("exact"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{exact("/api/v1/login")})}},
		&outbound.HttpRoute{Metadata: md("get"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{methodGet})}},
		&outbound.HttpRoute{Metadata: md("canary"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{withHeader})}},
	)
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	cases := []struct {
		method, path string
		header       http.Header
		want         string
	}{
		{"POST", "/other", nil, "httproute/shop/root"},
		{"POST", "/api", nil, "httproute/shop/api"},
		{"POST", "/apix", nil, "httproute/shop/root"},
		{"POST", "/api/v1/users", nil, "httproute/shop/api-v1"},
		{"POST", "/api/v1/login", nil, "httproute/shop/exact"},
		{"GET", "/api/x", nil, "httproute/shop/get"},
		{"POST", "/api/x", http.Header{"X-Canary": {"1"}}, "httproute/shop/canary"},
		{"GET", "/api/x", http.Header{"X-Canary": {"1"}}, "httproute/shop/get"},
	}
	for _, c := range cases {
		rq := req(c.method, c.path)
		if c.header != nil {
			rq.Header = c.header
		}
		assert.Equal(t, c.want, r.Select(rq).Name, "%s %s %v", c.method, c.path, c.header)
	}
}

func TestRoutesFilterByHostAndUnmatchedRequestsAreNotFound(t *testing.T) {
	pol := httpPolicy(&outbound.HttpRoute{
		Metadata: md("only-api-host"),
		Hosts: []*httproute.HostMatch{
			{Match: &httproute.HostMatch_Exact{Exact: "api.example.com"}},
			{Match: &httproute.HostMatch_Suffix_{Suffix: &httproute.HostMatch_Suffix{ReverseLabels: []string{"com", "corp"}}}},
		},
		Rules: []*outbound.HttpRoute_Rule{rule(nil)},
	})
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	for host, ok := range map[string]bool{"api.example.com": true, "API.Example.Com.": true, "x.corp.com": true, "corp.com": false, "other": false} {
		rq := req("GET", "/")
		rq.Host = host
		assert.Equal(t, ok, !route.NotFound(r.Select(rq)), host)
	}
}

func TestFiltersRedirectAndModifyHeaders(t *testing.T) {
	redirect := &outbound.HttpRoute_Filter{Kind: &outbound.HttpRoute_Filter_Redirect{Redirect: &httproute.RequestRedirect{
		Scheme: &httptypes.Scheme{Type: &httptypes.Scheme_Registered_{Registered: httptypes.Scheme_HTTPS}},
		Host:   "new.example.com",
		Path:   &httproute.PathModifier{Replace: &httproute.PathModifier_Prefix{Prefix: "/v2"}},
		Status: 302,
	}}}
	mod := &outbound.HttpRoute_Filter{Kind: &outbound.HttpRoute_Filter_RequestHeaderModifier{RequestHeaderModifier: &httproute.RequestHeaderModifier{
		Add:    &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-added", Value: []byte("a")}}},
		Set:    &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-set", Value: []byte("s")}}},
		Remove: []string{"x-secret"},
	}}}
	pol := httpPolicy(&outbound.HttpRoute{Metadata: md("r"), Rules: []*outbound.HttpRoute_Rule{
		rule([]*httproute.HttpRouteMatch{prefix("/v1")}, redirect),
		rule([]*httproute.HttpRouteMatch{prefix("/mod")}, mod),
	}})
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	rt := r.Select(req("GET", "/v1/items"))
	require.NotNil(t, rt.Redirect)
	assert.Equal(t, 302, rt.Redirect.Status)
	assert.Equal(t, "https://new.example.com/v2/items?q=1", rt.Redirect.Location("http", "web", 80, "/v1/items", "q=1", rt.MatchedPrefix()))

	rt = r.Select(req("GET", "/mod"))
	h := http.Header{"X-Set": {"old"}, "X-Secret": {"x"}, "X-Added": {"first"}}
	rt.RequestHeaders.Apply(h)
	assert.Equal(t, http.Header{"X-Set": {"s"}, "X-Added": {"first", "a"}}, h)
}

func TestWeightedBackendsSplitTraffic(t *testing.T) {
	pol := httpPolicy(&outbound.HttpRoute{Metadata: md("split"), Rules: []*outbound.HttpRoute_Rule{{
		Backends: weighted(map[string]uint32{"v1:80": 90, "v2:80": 10, "v0:80": 0}),
	}}})
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	rt := r.Select(req("GET", "/"))
	n := map[string]int{}
	for i := 0; i < 10000; i++ {
		i := route.PickBackend(rt.Backends, rt.FirstAvailable, func(int) bool { return true })
		n[rt.Backends[i].Authority]++
	}
	assert.InDelta(t, 9000, n["v1:80"], 400)
	assert.InDelta(t, 1000, n["v2:80"], 400)
	assert.Zero(t, n["v0:80"])
}

func TestRetriesTimeoutsAndAccrualAreRead(t *testing.T) {
	post := &httproute.HttpRouteMatch{Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_POST}}}
	retry := &outbound.HttpRoute_Retry{
		MaxRetries: 2, MaxRequestBytes: 1 << 20,
		Conditions: &outbound.HttpRoute_Retry_Conditions{StatusRanges: []*outbound.HttpRoute_Retry_Conditions_StatusRange{{Start: 500, End: 599}}},
		Timeout:    durationpb.New(time.Second),
	}
	pol := httpPolicy(&outbound.HttpRoute{Metadata: md("r"), Rules: []*outbound.HttpRoute_Rule{
		{Matches: []*httproute.HttpRouteMatch{prefix("/")}, Retry: retry, Timeouts: &httproute.Timeouts{Request: durationpb.New(5 * time.Second), Idle: durationpb.New(time.Minute)}},
		{Matches: []*httproute.HttpRouteMatch{post}, Retry: retry},
	}})
	pol.GetProtocol().GetDetect().Http1.FailureAccrual = &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_ConsecutiveFailures_{ConsecutiveFailures: &outbound.FailureAccrual_ConsecutiveFailures{MaxFailures: 3}}}
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	rt := r.Select(req("GET", "/x"))
	require.NotNil(t, rt.Retry)
	assert.Equal(t, uint32(2), rt.Retry.MaxRetries)
	assert.Equal(t, int64(64<<10), rt.Retry.MaxRequestBytes, "replay is capped at 64 KiB whatever the policy says")
	assert.True(t, rt.Retry.RetryableStatus(503))
	assert.False(t, rt.Retry.RetryableStatus(404))
	assert.False(t, rt.Retry.NonIdempotent, "a rule that does not name its methods retries idempotent ones only")
	assert.Equal(t, 5*time.Second, rt.Timeouts.Request)
	assert.Equal(t, time.Minute, rt.Timeouts.Idle)
	assert.True(t, r.Select(req("POST", "/x")).Retry.NonIdempotent, "a rule naming POST explicitly retries POST")
	require.NotNil(t, r.Accrual)
	assert.Equal(t, 3, r.Accrual.MaxFailures)
}

func TestGRPCRoutesMatchServiceAndMethod(t *testing.T) {
	grpcRule := func(svc, method string, retryUnavailable bool) *outbound.GrpcRoute_Rule {
		rr := &outbound.GrpcRoute_Rule{Matches: []*grpcroute.GrpcRouteMatch{{Rpc: &grpcroute.GrpcRpcMatch{Service: svc, Method: method}}}}
		if retryUnavailable {
			rr.Retry = &outbound.GrpcRoute_Retry{MaxRetries: 1, Conditions: &outbound.GrpcRoute_Retry_Conditions{Unavailable: true}}
		}
		return rr
	}
	pol := &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{Routes: []*outbound.GrpcRoute{
		{Metadata: md("svc"), Rules: []*outbound.GrpcRoute_Rule{grpcRule("shop.Cart", "", false)}},
		{Metadata: md("method"), Rules: []*outbound.GrpcRoute_Rule{grpcRule("shop.Cart", "Add", true)}},
	}}}}}
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	g := func(path string) *route.Route {
		rq := req("POST", path)
		rq.GRPC, rq.HTTP2 = true, true
		return r.Select(rq)
	}
	assert.Equal(t, "httproute/shop/method", g("/shop.Cart/Add").Name)
	assert.True(t, g("/shop.Cart/Add").Retry.GRPCCodes[14])
	assert.Equal(t, "httproute/shop/svc", g("/shop.Cart/Remove").Name)
	assert.True(t, route.NotFound(g("/shop.Other/Add")))
}

func TestProfilesTakePrecedenceWithRetriesTimeoutsAndBudget(t *testing.T) {
	prof := &destination.DestinationProfile{
		RetryBudget: &destination.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 3, Ttl: durationpb.New(5 * time.Second)},
		Routes: []*destination.Route{
			{
				Condition:       &destination.RequestMatch{Match: &destination.RequestMatch_All{All: &destination.RequestMatch_Seq{Matches: []*destination.RequestMatch{{Match: &destination.RequestMatch_Path{Path: &destination.PathMatch{Regex: "/books/[0-9]+"}}}, {Match: &destination.RequestMatch_Method{Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_GET}}}}}}}},
				IsRetryable:     true,
				Timeout:         durationpb.New(300 * time.Millisecond),
				MetricsLabels:   map[string]string{"route": "GET /books/{id}"},
				ResponseClasses: []*destination.ResponseClass{{Condition: &destination.ResponseMatch{Match: &destination.ResponseMatch_Status{Status: &destination.HttpStatusRange{Min: 500, Max: 504}}}, IsFailure: true}, {Condition: &destination.ResponseMatch{Match: &destination.ResponseMatch_Status{Status: &destination.HttpStatusRange{Min: 505, Max: 599}}}, IsFailure: false}},
			},
		},
		DstOverrides: []*destination.WeightedDst{{Authority: "books-v2:80", Weight: 100}},
	}
	pol := httpPolicy(&outbound.HttpRoute{Metadata: md("ignored"), Rules: []*outbound.HttpRoute_Rule{rule(nil)}})
	r, err := route.Compile(pol, prof, target)
	require.NoError(t, err)
	rt := r.Select(req("GET", "/books/12"))
	assert.Equal(t, "GET /books/{id}", rt.Name)
	require.NotNil(t, rt.Retry)
	assert.True(t, rt.Retry.OnFailureClass)
	assert.Equal(t, 300*time.Millisecond, rt.Timeouts.Request)
	assert.Equal(t, "books-v2:80", rt.Backends[0].Authority, "traffic split overrides the destination")
	assert.True(t, route.Failure(rt.Classes, 503, ""))
	assert.False(t, route.Failure(rt.Classes, 505, ""), "a profile may declare a 5xx a success")
	assert.Equal(t, 0.5, r.Budget.Ratio)
	assert.Equal(t, "default", r.Select(req("POST", "/books/12")).Name, "unmatched requests take the profile's default route")
}

func TestCompileRefusesWhatItCannotFullyRead(t *testing.T) {
	badRegex := httpPolicy(&outbound.HttpRoute{Metadata: md("bad"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: "(["}}}})}})
	noRules := httpPolicy(&outbound.HttpRoute{Metadata: md("empty")})
	emptyFilter := httpPolicy(&outbound.HttpRoute{Metadata: md("f"), Rules: []*outbound.HttpRoute_Rule{rule(nil, &outbound.HttpRoute_Filter{})}})
	emptyHeader := httpPolicy(&outbound.HttpRoute{Metadata: md("h"), Rules: []*outbound.HttpRoute_Rule{rule([]*httproute.HttpRouteMatch{{Headers: []*httproute.HeaderMatch{{Name: "x"}}}})}})
	badStatus := httpPolicy(&outbound.HttpRoute{Metadata: md("s"), Rules: []*outbound.HttpRoute_Rule{{Retry: &outbound.HttpRoute_Retry{Conditions: &outbound.HttpRoute_Retry_Conditions{StatusRanges: []*outbound.HttpRoute_Retry_Conditions_StatusRange{{Start: 700}}}}}}})
	badProfile := &destination.DestinationProfile{Routes: []*destination.Route{{}}}
	for name, c := range map[string]struct {
		pol  *outbound.OutboundPolicy
		prof *destination.DestinationProfile
	}{"invalid regex": {badRegex, nil}, "route without rules": {noRules, nil}, "filter without kind": {emptyFilter, nil},
		"header match without value": {emptyHeader, nil}, "retry status beyond 599": {badStatus, nil}, "profile route without condition": {nil, badProfile}} {
		_, err := route.Compile(c.pol, c.prof, target)
		assert.Error(t, err, name)
		if err != nil {
			assert.Contains(t, err.Error(), target, "the error names the destination")
		}
	}
}

func ExampleCompile() {
	r, _ := route.Compile(nil, nil, "web.shop.svc.cluster.local:80")
	rt := r.Select(route.Request{Method: "GET", Path: "/", Host: "web"})
	fmt.Println(rt.Name, rt.Backends[0].Authority)
	// Output: default web.shop.svc.cluster.local:80
}

func TestV0_20BalancerAccrualAndRetryAfterFieldsAreRead(t *testing.T) {
	backoff := &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute), JitterRatio: 0.25, RespectRetryAfterHint: true}
	be := balancer("web.shop.svc.cluster.local:80")
	be.GetBalancer().Load = &outbound.Backend_BalanceP2C_PenaltyPeakEwma_{PenaltyPeakEwma: &outbound.Backend_BalanceP2C_PenaltyPeakEwma{
		DefaultRtt: durationpb.New(30 * time.Millisecond), Decay: durationpb.New(10 * time.Second),
		Penalty: durationpb.New(5 * time.Second), MaxRetryAfter: durationpb.New(5 * time.Minute), PenaltyDecay: durationpb.New(10 * time.Second),
	}}
	retry := &outbound.HttpRoute_Retry{MaxRetries: 1, Backoff: &outbound.ExponentialBackoff{
		MinBackoff: durationpb.New(25 * time.Millisecond), MaxBackoff: durationpb.New(5 * time.Second), RespectRetryAfterHint: true}}
	pol := httpPolicy(&outbound.HttpRoute{Metadata: md("r"), Rules: []*outbound.HttpRoute_Rule{{
		Matches: []*httproute.HttpRouteMatch{prefix("/")}, Retry: retry,
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{
			Backends: []*outbound.HttpRoute_RouteBackend{{Backend: be}}}}},
	}}})
	pol.GetProtocol().GetDetect().Http1.FailureAccrual = &outbound.FailureAccrual{
		Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
			SuccessRateThreshold: 0.8, Decay: durationpb.New(10 * time.Second), MinRequests: 5, MaxConsecutiveFailures: 7, Backoff: backoff}},
		Ejection: &outbound.EjectionConfig{MinReadyEndpoints: 2},
	}
	r, err := route.Compile(pol, nil, target)
	require.NoError(t, err)
	require.NotNil(t, r.Accrual)
	a := *r.Accrual
	assert.True(t, a.Unified)
	assert.Equal(t, 7, a.MaxFailures)
	assert.Equal(t, 0.8, a.SuccessRate)
	assert.Equal(t, 10*time.Second, a.Window)
	assert.Equal(t, 5, a.MinRequests)
	assert.Equal(t, time.Second, a.MinBackoff)
	assert.Equal(t, time.Minute, a.MaxBackoff)
	assert.Equal(t, 0.25, a.Jitter)
	assert.True(t, a.RespectRetryAfter)
	assert.Equal(t, 2, a.MinReady)

	rt := r.Select(req("GET", "/x"))
	require.Len(t, rt.Backends, 1)
	require.NotNil(t, rt.Backends[0].Penalty, "penalty_peak_ewma selects the penalised estimator")
	assert.Equal(t, 5*time.Second, rt.Backends[0].Penalty.Penalty)
	assert.Equal(t, 5*time.Minute, rt.Backends[0].Penalty.MaxRetryAfter)
	assert.Equal(t, 30*time.Millisecond, rt.Backends[0].DefaultRTT)
	require.NotNil(t, rt.Retry)
	assert.True(t, rt.Retry.RespectRetryAfter)
}

func TestThePolicysBuiltInRoutesAreTheDefaultRoute(t *testing.T) {
	builtin := func(name string) *meta.Metadata { return &meta.Metadata{Kind: &meta.Metadata_Default{Default: name}} }
	r, err := route.Compile(httpPolicy(&outbound.HttpRoute{Metadata: builtin("http"), Rules: []*outbound.HttpRoute_Rule{rule(nil)}}), nil, target)
	require.NoError(t, err)
	assert.Equal(t, route.DefaultName, r.Select(req("GET", "/any")).Name, "the route the policy makes for a Service without HTTPRoutes")

	grpcPol := &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{
		Routes: []*outbound.GrpcRoute{{Metadata: builtin("grpc"), Rules: []*outbound.GrpcRoute_Rule{{}}}},
	}}}}
	r, err = route.Compile(grpcPol, nil, target)
	require.NoError(t, err)
	g := req("POST", "/pkg.Svc/Method")
	g.GRPC = true
	assert.Equal(t, route.DefaultName, r.Select(g).Name)

	r, err = route.Compile(httpPolicy(&outbound.HttpRoute{Metadata: md("web"), Rules: []*outbound.HttpRoute_Rule{rule(nil)}}), nil, target)
	require.NoError(t, err)
	assert.Equal(t, "httproute/shop/web", r.Select(req("GET", "/any")).Name, "a route resource keeps its name")

	// An EgressNetwork's built-in routes keep their names, which
	// Linkerd's metrics carry (rt_route="http-egress-deny").
	egress := httpPolicy(&outbound.HttpRoute{Metadata: builtin("http-egress-deny"), Rules: []*outbound.HttpRoute_Rule{rule(nil)}})
	egress.Metadata = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "policy.linkerd.io", Kind: "EgressNetwork", Name: "egress", Namespace: "shop"}}}
	r, err = route.Compile(egress, nil, target)
	require.NoError(t, err)
	assert.Equal(t, "http-egress-deny", r.Select(req("GET", "/any")).Name)
}
