package retry_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/retry"
)

func TestRetryAfterReadsSecondsAndDatesOnlyFrom429And503(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	h := func(vs ...string) http.Header { return http.Header{"Retry-After": vs} }
	for _, c := range []struct {
		name   string
		status int
		h      http.Header
		want   time.Duration
		ok     bool
	}{
		{"seconds on a 503", 503, h("2"), 2 * time.Second, true},
		{"seconds on a 429", 429, h(" 120 "), 2 * time.Minute, true},
		{"zero", 503, h("0"), 0, true},
		{"a date ahead", 503, h("Mon, 01 Jun 2026 12:00:30 GMT"), 30 * time.Second, true},
		{"a date past is now", 429, h("Mon, 01 Jun 2026 11:00:00 GMT"), 0, true},
		{"a 500 carries no hint", 500, h("2"), 0, false},
		{"a 200 carries no hint", 200, h("2"), 0, false},
		{"missing", 503, http.Header{}, 0, false},
		{"negative", 503, h("-1"), 0, false},
		{"fractional", 503, h("1.5"), 0, false},
		{"garbage", 503, h("soon"), 0, false},
		{"two values", 503, h("1", "100"), 0, false},
		{"huge is cut to a day", 503, h("99999999999999999999"), 24 * time.Hour, true},
	} {
		d, ok := retry.RetryAfter(c.status, c.h, now)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, d, c.name)
	}
}

func TestGRPCPushbackReadsNonNegativeMilliseconds(t *testing.T) {
	for v, want := range map[string]time.Duration{"250": 250 * time.Millisecond, "0": 0} {
		d, ok := retry.GRPCPushback(http.Header{"Grpc-Retry-Pushback-Ms": {v}})
		assert.True(t, ok, v)
		assert.Equal(t, want, d, v)
	}
	for _, v := range []string{"-1", "x", "99999999999"} {
		_, ok := retry.GRPCPushback(http.Header{"Grpc-Retry-Pushback-Ms": {v}})
		assert.False(t, ok, v)
	}
}

func TestBackoffTakesTheHintOnlyWhenAskedAndWithinItsBounds(t *testing.T) {
	zero := func() float64 { return 0 }
	b := retry.Backoff{Min: 25 * time.Millisecond, Max: 5 * time.Second}
	assert.Equal(t, 25*time.Millisecond, b.Delay(1, 2*time.Second, true, zero), "the hint is ignored unless respected")
	assert.Equal(t, 50*time.Millisecond, b.Delay(2, 0, false, zero))
	assert.Equal(t, 5*time.Second, b.Delay(20, 0, false, zero), "capped")

	b.RespectRetryAfter = true
	assert.Equal(t, 2*time.Second, b.Delay(1, 2*time.Second, true, zero), "Retry-After: 2 waits 2s")
	assert.Equal(t, 5*time.Second, b.Delay(1, time.Hour, true, zero), "cut to Max")
	assert.Equal(t, 25*time.Millisecond, b.Delay(1, 0, true, zero), "at least Min")
	assert.Equal(t, 25*time.Millisecond, b.Delay(1, 0, false, zero), "no hint: the exponential backoff")

	j := retry.Backoff{Min: time.Second, Max: time.Second, Jitter: 0.5}
	assert.Equal(t, 1500*time.Millisecond, j.Delay(1, 0, false, func() float64 { return 0.999999999 }).Round(time.Millisecond))
}
