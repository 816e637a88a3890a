package dataplane_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The v0.20 outbound fields at work over real connections: penalised
// peak EWMA, the unified breaker with its ejection and comeback, and
// Retry-After. Time-sensitive steps run on the proxy's injected clock,
// which only moves when the test moves it.

// fakeClock is the proxy's clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// balancedRule routes everything to target's balancer with load as its
// estimator.
func balancedRule(target string, load *outbound.Backend_BalanceP2C_PenaltyPeakEwma) *outbound.HttpRoute_Rule {
	p2c := &outbound.Backend_BalanceP2C{Discovery: &outbound.Backend_EndpointDiscovery{Kind: &outbound.Backend_EndpointDiscovery_Dst{
		Dst: &outbound.Backend_EndpointDiscovery_DestinationGet{Path: target}}}}
	if load != nil {
		p2c.Load = &outbound.Backend_BalanceP2C_PenaltyPeakEwma_{PenaltyPeakEwma: load}
	}
	be := &outbound.Backend{Metadata: routeMeta("backend"), Queue: &outbound.Queue{Capacity: 100, FailfastTimeout: durationpb.New(3 * time.Second)},
		Kind: &outbound.Backend_Balancer{Balancer: p2c}}
	return &outbound.HttpRoute_Rule{
		Matches: []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}},
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{
			Backends: []*outbound.HttpRoute_RouteBackend{{Backend: be}}}}},
	}
}

func TestPenalisedPeakEWMAStopsSendingToAnEndpointThatAnswers429(t *testing.T) {
	const target = "api.shop.svc.cluster.local:80"
	for _, penalised := range []bool{true, false} {
		limited, ok := startHTTPApp(t), startHTTPApp(t)
		limited.handler = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTooManyRequests) }
		clock := newFakeClock() // frozen: every answer takes no time, so only the penalty tells the endpoints apart
		o := startOutboundOnly(t, target, dataplane.WithClock(clock.now))
		o.resolver.Set(target, endpointOf(limited), endpointOf(ok))
		var load *outbound.Backend_BalanceP2C_PenaltyPeakEwma
		if penalised {
			load = &outbound.Backend_BalanceP2C_PenaltyPeakEwma{DefaultRtt: durationpb.New(30 * time.Millisecond), Decay: durationpb.New(10 * time.Second),
				Penalty: durationpb.New(5 * time.Second), MaxRetryAfter: durationpb.New(5 * time.Minute), PenaltyDecay: durationpb.New(10 * time.Second)}
		}
		o.outbound.Set(target, policyWith(nil, balancedRule(target, load)))
		c := h1Client()
		// Until the rate-limited endpoint has answered once (each pick is a
		// coin toss between two equal endpoints).
		for i := 0; i < 60 && limited.requests.Load() == 0; i++ {
			get(t, c, o.url("/"))
		}
		require.Equal(t, int32(1), limited.requests.Load(), "penalised=%v", penalised)
		for i := 0; i < 40; i++ {
			get(t, c, o.url("/"))
		}
		if penalised {
			assert.Equal(t, int32(1), limited.requests.Load(), "one 429 makes the endpoint cost 5s: every later pick prefers the other")
		} else {
			assert.Greater(t, limited.requests.Load(), int32(1), "plain peak EWMA keeps choosing it")
		}
	}
}

func TestTheUnifiedBreakerEjectsAFailingEndpointAndLetsItBackAfterItsBackoff(t *testing.T) {
	const target = "flaky.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var failing atomic.Bool
	failing.Store(true)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	clock := newFakeClock()
	o := startOutboundOnly(t, target, dataplane.WithClock(clock.now))
	o.resolver.Set(target, endpointOf(app))
	accrual := &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
		SuccessRateThreshold: 0.8, Decay: durationpb.New(10 * time.Second), MinRequests: 5, MaxConsecutiveFailures: 2,
		Backoff: &outbound.ExponentialBackoff{MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(time.Minute)},
	}}}
	o.outbound.Set(target, policyWith(accrual, &outbound.HttpRoute_Rule{}))
	c := h1Client()

	for i := 0; i < 2; i++ {
		resp, _ := get(t, c, o.url("/"))
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	}
	// Two failures in a row: ejected. The proxy answers at once without
	// reaching the application, for as long as the clock stands still.
	for i := 0; i < 5; i++ {
		resp, _ := get(t, c, o.url("/"))
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Contains(t, resp.Header.Get("L5d-Proxy-Error"), "unavailable")
	}
	assert.Equal(t, int32(2), app.requests.Load(), "an ejected endpoint gets nothing")

	failing.Store(false)
	clock.advance(10*time.Second - time.Millisecond)
	resp, _ := get(t, c, o.url("/"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "not before its backoff is over")
	assert.Equal(t, int32(2), app.requests.Load())

	clock.advance(time.Millisecond)
	resp, _ = get(t, c, o.url("/"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the probe reaches it and succeeds")
	for i := 0; i < 3; i++ {
		resp, _ := get(t, c, o.url("/"))
		assert.Equal(t, http.StatusOK, resp.StatusCode, "and it is back")
	}
	assert.Equal(t, int32(6), app.requests.Load())
}

func TestAnEjectionRespectsTheRetryAfterOfTheResponseThatCausedIt(t *testing.T) {
	const target = "busy.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var busy atomic.Bool
	busy.Store(true)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		if busy.Load() {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	clock := newFakeClock()
	o := startOutboundOnly(t, target, dataplane.WithClock(clock.now))
	o.resolver.Set(target, endpointOf(app))
	accrual := &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
		MaxConsecutiveFailures: 1,
		Backoff:                &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Second), MaxBackoff: durationpb.New(time.Minute), RespectRetryAfterHint: true},
	}}}
	o.outbound.Set(target, policyWith(accrual, &outbound.HttpRoute_Rule{}))
	c := h1Client()

	resp, _ := get(t, c, o.url("/"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	busy.Store(false)
	clock.advance(29 * time.Second)
	resp, _ = get(t, c, o.url("/"))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "ejected for the 30s the server asked, not the 1s backoff")
	assert.Equal(t, int32(1), app.requests.Load())
	clock.advance(time.Second)
	resp, _ = get(t, c, o.url("/"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, int32(2), app.requests.Load())
}

func TestA503WithRetryAfterIsRetriedNoSooner(t *testing.T) {
	// The retry waits on real time (the server's hint is seconds); the
	// check is a lower bound, which load can only make later.
	const target = "later.shop.svc.cluster.local:80"
	app := startHTTPApp(t)
	var mu sync.Mutex
	var arrivals []time.Time
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		first := len(arrivals) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, endpointOf(app))
	retry := &outbound.HttpRoute_Retry{
		MaxRetries: 1,
		Conditions: &outbound.HttpRoute_Retry_Conditions{StatusRanges: []*outbound.HttpRoute_Retry_Conditions_StatusRange{{Start: 503, End: 503}}},
		Backoff:    &outbound.ExponentialBackoff{MinBackoff: durationpb.New(25 * time.Millisecond), MaxBackoff: durationpb.New(10 * time.Second), RespectRetryAfterHint: true},
	}
	o.outbound.Set(target, policyWith(nil, &outbound.HttpRoute_Rule{Retry: retry}))

	resp, _ := get(t, h1Client(), o.url("/"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the retry succeeds")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, arrivals, 2)
	assert.GreaterOrEqual(t, arrivals[1].Sub(arrivals[0]), 2*time.Second, "Retry-After: 2 is honoured")
}
