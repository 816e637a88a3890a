package retry

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHint bounds a parsed hint, so that no header can make a delay
// overflow; every caller cuts hints much shorter anyway.
const maxHint = 24 * time.Hour

// RetryAfter reads the server's hint on when to try again from a 429 or
// 503 response: Retry-After as delay-seconds ("120") or an HTTP-date (the
// time left until then, 0 when it is past). ok is false for other
// statuses and for a missing or malformed header. The value is cut to one
// day. (RFC 9110 section 10.2.3.)
func RetryAfter(status int, h http.Header, now time.Time) (d time.Duration, ok bool) {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return 0, false
	}
	vs := h.Values("Retry-After")
	if len(vs) != 1 {
		return 0, false // none, or several that may disagree
	}
	v := strings.TrimSpace(vs[0])
	if v != "" && strings.Trim(v, "0123456789") == "" {
		if len(v) > 9 {
			return maxHint, true
		}
		n, _ := strconv.Atoi(v)
		return min(time.Duration(n)*time.Second, maxHint), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxHint), true
}

// GRPCPushback reads grpc-retry-pushback-ms, the gRPC server's hint on when
// to try again (gRPC A6): a non-negative count of milliseconds. A negative
// value means "do not retry", which is not a delay; it and malformed values
// give ok false.
func GRPCPushback(h http.Header) (d time.Duration, ok bool) {
	vs := h.Values("Grpc-Retry-Pushback-Ms")
	if len(vs) != 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return min(time.Duration(n)*time.Millisecond, maxHint), true
}

// Backoff is the delay before retry number n (1 for the first retry):
// MinBackoff doubled per retry up to MaxBackoff, plus up to Jitter of
// itself at random. With RespectRetryAfter, a hint from the response that
// is being retried (RetryAfter, GRPCPushback) replaces it, kept between
// MinBackoff and MaxBackoff: a 503 with Retry-After: 2 is retried no
// sooner than 2s later when MaxBackoff allows it.
type Backoff struct {
	Min, Max          time.Duration
	Jitter            float64
	RespectRetryAfter bool
}

// Delay returns the wait before retry number n, given the response's hint
// (when hasHint). rnd returns a number in [0, 1) (math/rand/v2.Float64 when
// nil).
func (b Backoff) Delay(n uint32, hint time.Duration, hasHint bool, rnd func() float64) time.Duration {
	if b.RespectRetryAfter && hasHint {
		return min(max(hint, b.Min), max(b.Max, b.Min))
	}
	d := b.Min << min(max(n, 1)-1, 16)
	if d > b.Max || d <= 0 {
		d = b.Max
	}
	if b.Jitter > 0 {
		if rnd == nil {
			rnd = rand.Float64
		}
		d += time.Duration(float64(d) * b.Jitter * rnd())
	}
	return d
}
