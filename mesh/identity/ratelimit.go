package identity

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// RateLimit is the per-identity limit on Certify calls: a token bucket of
// Burst calls, refilled at PerSecond calls per second, for each identity a
// token proves. A call beyond it is refused with ErrRateLimited before the
// CSR is checked or anything is signed.
//
// The defaults ([DefaultRateLimit]) let 1,000 pods of one service account
// start at once: each asks for one certificate at start and renews at 70%
// of the lifetime (every 16.8 h with 24 h certificates), so a steady
// 100,000-pod service account needs under 2 calls per second; a pod in a
// restart loop (kubelet backs off from 10 s to 5 min) asks at most every
// 10 s. A token holder hammering the CA is held to PerSecond calls a
// second after the burst.
type RateLimit struct {
	// Burst is how many calls one identity may make at once (at least 1).
	Burst int
	// PerSecond is the refill rate, in calls per second (above 0).
	PerSecond float64
}

// DefaultRateLimit is the limit NewService applies unless told otherwise.
var DefaultRateLimit = RateLimit{Burst: 1000, PerSecond: 10}

// Off reports whether r is the zero RateLimit, which turns the limit off.
func (r RateLimit) Off() bool { return r == RateLimit{} }

// Validate reports a limit that cannot admit a call. The zero RateLimit
// (no limit) is valid.
func (r RateLimit) Validate() error {
	if r.Off() {
		return nil
	}
	if r.Burst < 1 {
		return fmt.Errorf("identity: rate limit burst %d is below 1", r.Burst)
	}
	if !(r.PerSecond > 0) || math.IsInf(r.PerSecond, 0) {
		return fmt.Errorf("identity: rate limit of %v per second is not a positive number", r.PerSecond)
	}
	return nil
}

// String describes the limit for error messages.
func (r RateLimit) String() string {
	if r.Off() {
		return "no limit"
	}
	return fmt.Sprintf("%d at once, then %g per second", r.Burst, r.PerSecond)
}

// limiter holds one token bucket per identity. Buckets that have refilled
// completely are forgotten (a new one starts full), so it holds only the
// identities that asked recently.
type limiter struct {
	limit RateLimit

	mu        sync.Mutex
	buckets   map[Name]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(r RateLimit) *limiter {
	return &limiter{limit: r, buckets: map[Name]*bucket{}}
}

// fill is how long an empty bucket takes to refill.
func (l *limiter) fill() time.Duration {
	return time.Duration(float64(l.limit.Burst) / l.limit.PerSecond * float64(time.Second))
}

// take spends one call of n's bucket at now. When the bucket is empty it
// spends nothing and returns how long until a call is available.
func (l *limiter) take(n Name, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= l.fill() {
		l.sweep(now)
	}
	b := l.buckets[n]
	if b == nil {
		b = &bucket{tokens: float64(l.limit.Burst), at: now}
		l.buckets[n] = b
	}
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(float64(l.limit.Burst), b.tokens+d.Seconds()*l.limit.PerSecond)
		b.at = now
	}
	if b.tokens < 1 {
		wait := time.Duration((1 - b.tokens) / l.limit.PerSecond * float64(time.Second))
		return max(wait, time.Millisecond), false
	}
	b.tokens--
	return 0, true
}

// sweep forgets the buckets that are full by now.
func (l *limiter) sweep(now time.Time) {
	for n, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.limit.PerSecond >= float64(l.limit.Burst) {
			delete(l.buckets, n)
		}
	}
	l.lastSweep = now
}

// size is the number of identities tracked, for tests.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
