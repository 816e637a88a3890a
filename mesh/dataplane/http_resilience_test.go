package dataplane_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// outboundOnly is a client proxy with a mapped listener for target and
// in-memory discovery and policy, talking to unmeshed applications.
type outboundOnly struct {
	r        *running
	resolver *dataplane.MemoryResolver
	outbound *dataplane.MemoryOutboundPolicies
	profiles *dataplane.MemoryProfiles
	addr     string
}

func startOutboundOnly(t testing.TB, target string, opts ...dataplane.Option) *outboundOnly {
	o := &outboundOnly{resolver: dataplane.NewMemoryResolver(), outbound: dataplane.NewMemoryOutboundPolicies(), profiles: dataplane.NewMemoryProfiles()}
	mapped := testutil.Listen(t)
	opts = append(opts, dataplane.WithOutboundPolicies(o.outbound), dataplane.WithProfiles(o.profiles))
	o.r = startProxy(t, testConfig(), newPKI(t).identity(t, idA), o.resolver, nil, dataplane.Listeners{
		Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: target}},
	}, opts...)
	o.addr = mapped.Addr().String()
	return o
}

func (o *outboundOnly) url(path string) string { return "http://" + o.addr + path }

func endpointOf(a *httpApp) dataplane.Endpoint {
	return dataplane.Endpoint{Addr: netipAddrPort(a.port())}
}

func routeMeta(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "HTTPRoute", Namespace: "shop", Name: name}}}
}

// policyWith is an outbound policy whose HTTP/1 and HTTP/2 routes are
// rules, with optional failure accrual.
func policyWith(accrual *outbound.FailureAccrual, rules ...*outbound.HttpRoute_Rule) *outbound.OutboundPolicy {
	routes := []*outbound.HttpRoute{{Metadata: routeMeta("web"), Rules: rules}}
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: durationpb.New(10 * time.Second),
		Http1:   &outbound.ProxyProtocol_Http1{Routes: routes, FailureAccrual: accrual},
		Http2:   &outbound.ProxyProtocol_Http2{Routes: routes, FailureAccrual: accrual},
	}}}}
}

func retry5xx(max uint32, perTry time.Duration) *outbound.HttpRoute_Retry {
	r := &outbound.HttpRoute_Retry{
		MaxRetries: max,
		Conditions: &outbound.HttpRoute_Retry_Conditions{StatusRanges: []*outbound.HttpRoute_Retry_Conditions_StatusRange{{Start: 500, End: 599}}},
		Backoff:    &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Millisecond), MaxBackoff: durationpb.New(5 * time.Millisecond)},
	}
	if perTry > 0 {
		r.Timeout = durationpb.New(perTry)
	}
	return r
}

func methodMatch(m httptypes.HttpMethod_Registered) *httproute.HttpRouteMatch {
	return &httproute.HttpRouteMatch{Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: m}}}
}

func TestNoEndpointsAnswers503FastAndNewEndpointsServeTheSameConnection(t *testing.T) {
	const target = "empty.shop.svc.cluster.local:80"
	o := startOutboundOnly(t, target)
	o.resolver.Set(target)
	c := h1Client()
	// Every no-endpoints answer the client sees is counted once: under a
	// busy machine the proxy may answer a few more before it sees an
	// update, and the metric must agree with what was seen.
	noEndpoints := 0
	fetch := func() int {
		resp, _ := get(t, c, o.url("/"))
		if strings.Contains(resp.Header.Get("L5d-Proxy-Error"), "no-endpoints") {
			noEndpoints++
		}
		return resp.StatusCode
	}
	// No endpoint: the answer is the proxy's own 503 naming the cause, not
	// a timeout (the proxy does not hold the request waiting for one).
	resp, _ := get(t, c, o.url("/"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "no-endpoints")
	noEndpoints++

	app := startHTTPApp(t)
	o.resolver.Set(target, endpointOf(app))
	testutil.Eventually(t, 5*time.Second, func() bool {
		return fetch() == http.StatusOK
	}, "the endpoint that appeared serves the kept-alive connection")
	o.resolver.Set(target)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return fetch() == http.StatusServiceUnavailable
	}, "and its removal is seen mid-connection")
	assert.Equal(t, float64(noEndpoints), o.r.metric(t, "http_errors_total", `reason="no-endpoints"`, `direction="outbound"`))
}

func TestRemovedEndpointsGetNoRequestsAfterTheUpdate(t *testing.T) {
	// T29.
	const target = "churn.shop.svc.cluster.local:80"
	a, b := startHTTPApp(t), startHTTPApp(t)
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(a), endpointOf(b))
	c := h1Client()
	for i := 0; i < 40; i++ {
		resp, _ := get(t, c, o.url("/"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Positive(t, a.requests.Load())
	assert.Positive(t, b.requests.Load(), "requests are balanced over both endpoints")
	o.resolver.Set(target, endpointOf(b))
	testutil.Eventually(t, 5*time.Second, func() bool {
		before := a.requests.Load()
		for i := 0; i < 10; i++ {
			get(t, c, o.url("/"))
		}
		return a.requests.Load() == before
	}, "the update reaches the proxy")
	before := a.requests.Load()
	for i := 0; i < 40; i++ {
		resp, _ := get(t, c, o.url("/"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Equal(t, before, a.requests.Load(), "no request went to the removed endpoint")
}

func TestRetriesStayWithinTheBudget(t *testing.T) {
	// T37: a destination failing every request.
	const target = "failing.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var hits atomic.Int32
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	o.outbound.Set(target, policyWith(nil,
		&outbound.HttpRoute_Rule{Matches: []*httproute.HttpRouteMatch{methodMatch(httptypes.HttpMethod_POST)}, Retry: retry5xx(3, 0)},
		&outbound.HttpRoute_Rule{Retry: retry5xx(3, 0)},
	))
	const (
		ratio     = 0.2
		minPerSec = 1
		ttl       = 10 * time.Second
	)
	o.profiles.Set(target, &pdst.DestinationProfile{RetryBudget: &pdst.RetryBudget{RetryRatio: ratio, MinRetriesPerSecond: minPerSec, Ttl: durationpb.New(ttl)}})
	c := h1Client()
	start := time.Now()
	probes := 0
	testutil.Eventually(t, 5*time.Second, func() bool {
		probes++
		hits.Store(0)
		resp, _ := get(t, c, o.url("/probe"))
		return resp.StatusCode == http.StatusServiceUnavailable && hits.Load() > 1
	}, "the retry policy applies")

	hits.Store(0)
	const n = 300
	for i := 0; i < n; i++ {
		resp, _ := get(t, c, o.url(fmt.Sprintf("/item/%d", i)))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	}
	// The bound follows from retry.Budget, not from the machine's speed.
	// The budget counts requests and retries in one-second slots over its
	// TTL; a retry is allowed while the retries in live slots stay within
	// ratio × live requests + minPerSec × TTL. Cut the run into k
	// consecutive windows of TTL (k = 1 when it fits in one): the retries
	// of window j are all live at its last retry, beside at most the
	// requests of windows j-1 and j, so all retries are at most
	// ratio × requests × (1 when k = 1, else 2) + k × minPerSec × TTL.
	// The probes' requests count; their retries only spend the budget.
	elapsed := time.Since(start)
	k := int((elapsed+time.Second)/ttl) + 1
	spread := 1.0
	if k > 1 {
		spread = 2
	}
	requests := float64(probes + n)
	bound := int(ratio*requests*spread) + k*minPerSec*int(ttl/time.Second)
	retries := int(hits.Load()) - n
	assert.LessOrEqual(t, retries, bound, "retries stay within the budget (%d requests over %s: %d windows)", probes+n, elapsed, k)
	assert.Less(t, bound, 3*n, "the budget, not the policy's 3 retries per request, is what bounds them")
	assert.Positive(t, retries, "some requests were retried")
	assert.Positive(t, o.r.metric(t, "outbound_http_retry_budget_exhausted_total", `target="`+target+`"`))

	big := strings.Repeat("x", 65<<10)
	hits.Store(0)
	resp, err := c.Post(o.url("/upload"), "text/plain", strings.NewReader(big))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, int32(1), hits.Load(), "a body over 64 KiB is never retried")
}

func TestNonIdempotentRequestsAreRetriedOnlyWhenTheRouteSaysSo(t *testing.T) {
	const target = "methods.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var hits atomic.Int32
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadGateway)
	}
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	o.outbound.Set(target, policyWith(nil,
		&outbound.HttpRoute_Rule{Matches: []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/explicit"}}, Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_POST}}}}, Retry: retry5xx(2, 0)},
		&outbound.HttpRoute_Rule{Retry: retry5xx(2, 0)},
	))
	c := h1Client()
	count := func(method, path, body string) int32 {
		hits.Store(0)
		req, err := http.NewRequest(method, o.url(path), strings.NewReader(body))
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return hits.Load()
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return count("GET", "/x", "") == 3 }, "the policy applies")
	assert.Equal(t, int32(3), count("PUT", "/x", "small body"), "PUT is idempotent: retried, body replayed")
	assert.Equal(t, int32(1), count("POST", "/x", "small body"), "POST is not retried by a rule that does not name it")
	assert.Equal(t, int32(1), count("PATCH", "/x", "small body"))
	assert.Equal(t, int32(3), count("POST", "/explicit", "small body"), "a rule that names POST retries it")
	assert.Equal(t, "small body", app.last().Body, "the replayed body arrives whole")
}

func TestPerTryAndRequestTimeoutsAreHonoured(t *testing.T) {
	const target = "slow.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	o.outbound.Set(target, policyWith(nil,
		&outbound.HttpRoute_Rule{Matches: []*httproute.HttpRouteMatch{{Headers: []*httproute.HeaderMatch{{Name: "x-per-try", Value: &httproute.HeaderMatch_Exact{Exact: []byte("1")}}}}}, Retry: retry5xx(2, 150*time.Millisecond)},
		&outbound.HttpRoute_Rule{Timeouts: &httproute.Timeouts{Request: durationpb.New(200 * time.Millisecond)}},
	))
	c := h1Client()
	testutil.Eventually(t, 5*time.Second, func() bool {
		resp, _ := get(t, c, o.url("/sleep?d=1s"))
		return resp.StatusCode == http.StatusGatewayTimeout
	}, "the request timeout applies")
	start := time.Now()
	resp, _ := get(t, c, o.url("/sleep?d=3s"))
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	assert.Less(t, time.Since(start), 2*time.Second, "200ms, well before the application's 3s")
	assert.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "request-timeout")

	before := app.requests.Load()
	start = time.Now()
	resp, _ = get(t, c, o.url("/sleep?d=3s"), "X-Per-Try", "1")
	assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	assert.Less(t, time.Since(start), 2500*time.Millisecond, "three tries of 150ms, well before the application's 3s")
	testutil.Eventually(t, 2*time.Second, func() bool { return app.requests.Load()-before == 3 }, "each try reached the application")
}

func TestFailureAccrualEjectsAFailingEndpointAndAnswers503WhenAllFail(t *testing.T) {
	// T38.
	const target = "flaky.shop.svc.cluster.local:80"
	bad, good := startHTTPApp(t), startHTTPApp(t)
	bad.handler = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(bad), endpointOf(good))
	accrual := &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_ConsecutiveFailures_{ConsecutiveFailures: &outbound.FailureAccrual_ConsecutiveFailures{
		MaxFailures: 7,
		// A penalty longer than the test: with a 1 s one, 50 requests
		// under -race on a busy machine outlasted it and the probe that
		// follows a penalty reached the failing endpoint.
		Backoff: &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(2 * time.Minute)},
	}}}
	o.outbound.Set(target, policyWith(accrual, &outbound.HttpRoute_Rule{}))
	c := h1Client()
	testutil.Eventually(t, 5*time.Second, func() bool {
		for i := 0; i < 60; i++ {
			get(t, c, o.url("/"))
		}
		return bad.requests.Load() >= 7
	}, "the failing endpoint fails 7 times")
	after := bad.requests.Load()
	for i := 0; i < 50; i++ {
		resp, _ := get(t, c, o.url("/"))
		assert.Equal(t, http.StatusOK, resp.StatusCode, "the ejected endpoint gets no traffic")
	}
	assert.Equal(t, int32(0), bad.requests.Load()-after, "no probe within the penalty")

	o.resolver.Set(target, endpointOf(bad))
	for i := 0; i < 10; i++ {
		get(t, c, o.url("/"))
	}
	start := time.Now()
	resp, _ := get(t, c, o.url("/"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "every endpoint failing: 503")
	assert.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "unavailable")
	assert.Less(t, time.Since(start), 500*time.Millisecond, "fast: no dial, no wait")
}

func TestRoutesSplitTrafficModifyHeadersAndRedirect(t *testing.T) {
	const target = "web.shop.svc.cluster.local:80"
	v1, v2 := startHTTPApp(t), startHTTPApp(t)
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(v1))
	o.resolver.Set("web-v1.shop.svc.cluster.local:80", endpointOf(v1))
	o.resolver.Set("web-v2.shop.svc.cluster.local:80", endpointOf(v2))
	backend := func(authority string, w uint32) *outbound.HttpRoute_WeightedRouteBackend {
		return &outbound.HttpRoute_WeightedRouteBackend{Weight: w, Backend: &outbound.HttpRoute_RouteBackend{Backend: &outbound.Backend{
			Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "Service", Name: authority}}},
			Kind: &outbound.Backend_Balancer{Balancer: &outbound.Backend_BalanceP2C{Discovery: &outbound.Backend_EndpointDiscovery{
				Kind: &outbound.Backend_EndpointDiscovery_Dst{Dst: &outbound.Backend_EndpointDiscovery_DestinationGet{Path: authority}}}}},
		}}}
	}
	split := &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_RandomAvailable_{RandomAvailable: &outbound.HttpRoute_Distribution_RandomAvailable{
		Backends: []*outbound.HttpRoute_WeightedRouteBackend{backend("web-v1.shop.svc.cluster.local:80", 50), backend("web-v2.shop.svc.cluster.local:80", 50)},
	}}}
	o.outbound.Set(target, policyWith(nil,
		&outbound.HttpRoute_Rule{
			Matches:  []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/split"}}}},
			Backends: split,
			Filters: []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_RequestHeaderModifier{RequestHeaderModifier: &httproute.RequestHeaderModifier{
				Set: &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-routed-by", Value: []byte("weft")}}},
			}}}, {Kind: &outbound.HttpRoute_Filter_ResponseHeaderModifier{ResponseHeaderModifier: &httproute.ResponseHeaderModifier{
				Add: &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-route", Value: []byte("split")}}},
			}}}},
		},
		&outbound.HttpRoute_Rule{
			Matches: []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/old"}}}},
			Filters: []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_Redirect{Redirect: &httproute.RequestRedirect{
				Path: &httproute.PathModifier{Replace: &httproute.PathModifier_Prefix{Prefix: "/new"}}, Status: 308,
			}}}},
		},
		&outbound.HttpRoute_Rule{},
	))
	c := h1Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	testutil.Eventually(t, 5*time.Second, func() bool {
		resp, _ := get(t, c, o.url("/old/page?q=1"))
		return resp.StatusCode == http.StatusPermanentRedirect
	}, "the policy applies")
	resp, _ := get(t, c, o.url("/old/page?q=1"))
	assert.Equal(t, "http://"+strings.Split(o.addr, ":")[0]+":"+strings.Split(o.addr, ":")[1]+"/new/page?q=1", resp.Header.Get("Location"))

	for i := 0; i < 100; i++ {
		resp, _ := get(t, c, o.url("/split"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "split", resp.Header.Get("X-Route"))
	}
	assert.Greater(t, v2.requests.Load(), int32(25), "about half goes to v2")
	assert.Equal(t, []string{"weft"}, v2.last().Header["X-Routed-By"])
	assert.Positive(t, o.r.metric(t, "route_request_total", `direction="outbound"`, `rt_route="httproute/shop/web"`))
}

func TestProfileRoutesRetryAndTimeOut(t *testing.T) {
	const target = "books.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var hits atomic.Int32
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	o.profiles.Set(target, &pdst.DestinationProfile{Routes: []*pdst.Route{{
		Condition:     &pdst.RequestMatch{Match: &pdst.RequestMatch_Path{Path: &pdst.PathMatch{Regex: "/books/.*"}}},
		IsRetryable:   true,
		Timeout:       durationpb.New(2 * time.Second),
		MetricsLabels: map[string]string{"route": "books"},
	}}})
	c := h1Client()
	// Until the profile reaches the proxy, requests alternate between 500
	// and 200 unretried: wait for a success that a retry produced.
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, _ := get(t, c, o.url("/books/1"))
		return resp.StatusCode == http.StatusOK &&
			o.r.metric(t, "outbound_http_retries_total", `route="books"`, `reason="status"`) > 0
	}, "the failed first try is retried")
	assert.Positive(t, o.r.metric(t, "outbound_http_retries_total", `route="books"`, `reason="status"`))
	assert.Positive(t, o.r.metric(t, "route_retryable_total", `dst="`+target+`"`, `rt_route="books"`))
	assert.Positive(t, o.r.metric(t, "response_total", `direction="outbound"`, `status_code="500"`, `classification="failure"`),
		"the failed attempt is counted at the endpoint")
	assert.Positive(t, o.r.metric(t, "route_response_total", `rt_route="books"`, `status_code="200"`, `classification="success"`))
}

func TestFailureInjectionAnswersWithoutReachingTheApplication(t *testing.T) {
	const target = "faulty.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	o.outbound.Set(target, policyWith(nil, &outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{{
		Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{
			Status: 503, Message: "chaos", Ratio: &httproute.Ratio{Numerator: 1, Denominator: 1},
		}},
	}}}))
	c := h1Client()
	testutil.Eventually(t, 5*time.Second, func() bool {
		resp, _ := get(t, c, o.url("/"))
		return resp.StatusCode == http.StatusServiceUnavailable
	}, "the injector applies")
	resp, body := get(t, c, o.url("/"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "fault-injected: chaos", resp.Header.Get("L5d-Proxy-Error"))
	assert.Contains(t, body, "chaos")
	before := app.requests.Load()
	get(t, c, o.url("/"))
	assert.Equal(t, before, app.requests.Load())
}
