package balance_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
)

// pickOnly picks until the balancer hands out key, finishing the other
// picks with ok; it fails the test after 100 picks.
func pickOnly(t *testing.T, b *balance.Balancer[string], key string) *balance.Handle[string] {
	t.Helper()
	for i := 0; i < 100; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		if h.Value() == key {
			return h
		}
		h.Done(true)
	}
	t.Fatalf("%s was never picked", key)
	return nil
}

func TestClassifyNamesWhatTheEndpointDidWrong(t *testing.T) {
	for _, c := range []struct {
		status int
		grpc   string
		want   balance.Hint
	}{
		{200, "", balance.HintNone}, {404, "", balance.HintNone}, {400, "", balance.HintNone},
		{429, "", balance.HintRateLimited}, {503, "", balance.HintUnavailable},
		{500, "", balance.HintServerError}, {502, "", balance.HintServerError}, {599, "", balance.HintServerError},
		{200, "0", balance.HintNone}, {200, "8", balance.HintRateLimited}, {200, "14", balance.HintUnavailable},
		{200, "13", balance.HintServerError}, {200, "2", balance.HintServerError}, {200, "4", balance.HintServerError},
		{200, "15", balance.HintServerError}, {200, "3", balance.HintNone}, {200, "1", balance.HintNone}, {200, "x", balance.HintNone},
	} {
		assert.Equal(t, c.want, balance.Classify(c.status, c.grpc), "%d %q", c.status, c.grpc)
	}
}

func TestPenalisedPeakEWMATurnsAwayFromAnEndpointThatFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		penalty *balance.Penalty
		outcome balance.Outcome
		want    time.Duration // a's estimate after the failure
	}{
		{"a 429 costs the penalty", &balance.Penalty{}, balance.Outcome{Hint: balance.HintRateLimited}, 5 * time.Second},
		{"a 500 costs the penalty", &balance.Penalty{Penalty: time.Second}, balance.Outcome{Failure: true, Hint: balance.HintServerError}, time.Second},
		{"a 503's longer Retry-After counts", &balance.Penalty{}, balance.Outcome{Failure: true, Hint: balance.HintUnavailable, RetryAfter: 40 * time.Second, HasRetryAfter: true}, 40 * time.Second},
		{"up to MaxRetryAfter", &balance.Penalty{MaxRetryAfter: 20 * time.Second}, balance.Outcome{Hint: balance.HintRateLimited, RetryAfter: time.Hour, HasRetryAfter: true}, 20 * time.Second},
		{"a shorter hint does not lower it", &balance.Penalty{}, balance.Outcome{Hint: balance.HintRateLimited, RetryAfter: time.Second, HasRetryAfter: true}, 5 * time.Second},
		{"a 500's Retry-After is not a hint", &balance.Penalty{}, balance.Outcome{Hint: balance.HintServerError, RetryAfter: time.Minute, HasRetryAfter: true}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock() // frozen: every answer takes no time
			b := balance.New[string](balance.Options{Now: c.now, Penalty: tc.penalty})
			b.Update(items("a", "b"))
			pickOnly(t, b, "a").DoneWith(tc.outcome)
			assert.Equal(t, tc.want, snapshot(b, "a").Cost)
			for i := 0; i < 50; i++ {
				h, err := b.Pick()
				require.NoError(t, err)
				assert.Equal(t, "b", h.Value(), "power of two choices prefers the endpoint that answers")
				h.Done(true)
			}
		})
	}

	// Without the penalty a fast failure looks like a fast endpoint.
	c := newClock()
	b := balance.New[string](balance.Options{Now: c.now})
	b.Update(items("a", "b"))
	pickOnly(t, b, "a").DoneWith(balance.Outcome{Failure: true, Hint: balance.HintRateLimited})
	assert.Equal(t, 30*time.Millisecond, snapshot(b, "a").Cost, "plain peak EWMA counts the measured time")
}

func TestUnifiedBreakerEjectsWhenTheSuccessRateFallsOnceTheWindowHoldsEnough(t *testing.T) {
	c := newClock()
	acc := balance.Accrual{Unified: true, SuccessRate: 0.8, Window: 10 * time.Second, MinRequests: 5, MinBackoff: time.Second, MaxBackoff: time.Minute}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("a"))
	// Four failures: below the sample floor, and the run of failures is
	// off (MaxFailures 0 in unified mode).
	for i := 0; i < 4; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.DoneWith(balance.Outcome{Failure: true, Hint: balance.HintServerError})
		c.advance(100 * time.Millisecond)
	}
	assert.False(t, snapshot(b, "a").Ejected, "4 responses are not enough evidence")
	h, err := b.Pick()
	require.NoError(t, err)
	h.Done(true)
	assert.True(t, snapshot(b, "a").Ejected, "1 of 5 succeeded: below 80%")

	// Old failures age out of the window.
	c.advance(time.Second + time.Millisecond)
	h, err = b.Pick()
	require.NoError(t, err)
	h.Done(true) // the probe restores it, and the window starts cold
	for i := 0; i < 3; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.Done(false)
	}
	c.advance(11 * time.Second)
	for i := 0; i < 5; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.Done(true)
	}
	assert.False(t, snapshot(b, "a").Ejected, "the 3 failures are out of the window")
}

func TestRateLimitedResponsesCountAgainstTheSuccessRateNotTheRunOfFailures(t *testing.T) {
	c := newClock()
	limited := balance.Outcome{Hint: balance.HintRateLimited} // the route does not call 429 a failure
	acc := balance.Accrual{Unified: true, MaxFailures: 2, MinBackoff: time.Second, MaxBackoff: time.Minute}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("a"))
	for i := 0; i < 10; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.DoneWith(limited)
	}
	assert.False(t, snapshot(b, "a").Ejected, "429s are not a run of failures")
	// gRPC RESOURCE_EXHAUSTED is a failure to the route, still no run.
	for i := 0; i < 10; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.DoneWith(balance.Outcome{Failure: true, Hint: balance.HintRateLimited})
	}
	assert.False(t, snapshot(b, "a").Ejected, "RESOURCE_EXHAUSTED is not a run of failures either")
	// Nor does a rate-limited answer break a run.
	for _, o := range []balance.Outcome{{Failure: true}, limited, {Failure: true}} {
		h, err := b.Pick()
		require.NoError(t, err)
		h.DoneWith(o)
	}
	assert.True(t, snapshot(b, "a").Ejected, "two failures around a 429 are two in a row")

	acc.SuccessRate, acc.MinRequests = 0.5, 4
	b = balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("a"))
	for i := 0; i < 4; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.DoneWith(limited)
	}
	assert.True(t, snapshot(b, "a").Ejected, "but they lower the success rate")
}

func TestARateLimitedProbeKeepsTheEndpointOutOnlyUnderTheUnifiedBreaker(t *testing.T) {
	for _, unified := range []bool{true, false} {
		c := newClock()
		acc := balance.Accrual{Unified: unified, MaxFailures: 1, MinBackoff: time.Second, MaxBackoff: time.Minute}
		b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
		b.Update(items("a"))
		h, err := b.Pick()
		require.NoError(t, err)
		h.Done(false)
		require.True(t, snapshot(b, "a").Ejected)
		c.advance(time.Second)
		probe, err := b.Pick()
		require.NoError(t, err)
		probe.DoneWith(balance.Outcome{Hint: balance.HintRateLimited})
		assert.Equal(t, unified, snapshot(b, "a").Ejected, "unified=%v", unified)
		if unified {
			assert.Equal(t, 2*time.Second, snapshot(b, "a").Until.Sub(c.now()), "the next backoff")
		}
	}
}

func TestAnEjectionLastsAsLongAsTheRetryAfterHintWhenAsked(t *testing.T) {
	for _, tc := range []struct {
		name    string
		respect bool
		hint    time.Duration
		want    time.Duration
	}{
		{"respected", true, 20 * time.Second, 20 * time.Second},
		{"kept under MaxBackoff", true, time.Hour, time.Minute},
		{"kept over MinBackoff", true, 0, time.Second},
		{"ignored", false, 20 * time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			acc := balance.Accrual{Unified: true, MaxFailures: 1, MinBackoff: time.Second, MaxBackoff: time.Minute, RespectRetryAfter: tc.respect}
			b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
			b.Update(items("a"))
			h, err := b.Pick()
			require.NoError(t, err)
			h.DoneWith(balance.Outcome{Failure: true, Hint: balance.HintUnavailable, RetryAfter: tc.hint, HasRetryAfter: true})
			s := snapshot(b, "a")
			require.True(t, s.Ejected)
			assert.Equal(t, tc.want, s.Until.Sub(c.now()))
			c.advance(tc.want - time.Millisecond)
			_, err = b.Pick()
			assert.ErrorIs(t, err, balance.ErrUnavailable, "still out just before")
			c.advance(time.Millisecond)
			_, err = b.Pick()
			assert.NoError(t, err, "back on probation once the time is over")
		})
	}
}

func TestMinReadyKeepsAFloorOfEndpointsInTheBalancer(t *testing.T) {
	c := newClock()
	acc := balance.Accrual{MaxFailures: 1, MinBackoff: time.Second, MaxBackoff: time.Minute, MinReady: 1}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("a", "b"))
	pickOnly(t, b, "a").Done(false)
	require.True(t, snapshot(b, "a").Ejected, "b stays, so a may go")
	h, err := b.Pick()
	require.NoError(t, err)
	require.Equal(t, "b", h.Value())
	h.Done(false)
	assert.False(t, snapshot(b, "b").Ejected, "ejecting b would leave no endpoint")
	h, err = b.Pick()
	require.NoError(t, err)
	assert.Equal(t, "b", h.Value(), "b keeps serving")
	h.Done(true)

	// Once a is back, b may go.
	c.advance(time.Second)
	pickOnly(t, b, "a").Done(true)
	pickOnly(t, b, "b").Done(false)
	assert.True(t, snapshot(b, "b").Ejected)
}
