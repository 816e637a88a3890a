package ratelimit

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/policy/authz"
)

// DefaultMaxIdentities is how many per-identity buckets a Limiter keeps
// by default: with identities of at most 253 bytes (a DNS name), about
// 1.5 MiB.
const DefaultMaxIdentities = 4096

// Decision is the answer for one request.
type Decision struct {
	// Allowed is false when a limit refuses the request.
	Allowed bool
	// Scope is the limit that refused it (ScopeNone when allowed).
	Scope authz.RateLimitScope
	// RequestsPerSecond is that limit.
	RequestsPerSecond uint32
	// Reason is Linkerd's message for the refusal, for the
	// l5d-proxy-error header; empty when allowed.
	Reason string
}

// MetricScope is the ratelimit_scope label Linkerd's proxy gives a refusal
// in inbound_http_local_ratelimit_total: "total", or "identity" for the
// per-identity and override limits; "" when allowed.
func (d Decision) MetricScope() string {
	switch d.Scope {
	case authz.ScopeTotal:
		return "total"
	case authz.ScopeIdentity, authz.ScopeOverride:
		return "identity"
	}
	return ""
}

// bucket is a token bucket kept as GCRA state: tat is the "theoretical
// arrival time" in nanoseconds since the limiter's start, the moment the
// bucket would be full again. A request at now is admitted when the
// bucket, after it, would be full no later than now+burst.
type bucket struct {
	tat      atomic.Int64
	interval int64 // nanoseconds per token
	burst    int64 // interval × requests per second: a full bucket
	denied   Decision
}

func newBucket(rps uint32, scope authz.RateLimitScope) *bucket {
	b := &bucket{}
	b.init(rps, scope)
	return b
}

func (b *bucket) init(rps uint32, scope authz.RateLimitScope) {
	// Rates above 10⁹/s are treated as 10⁹/s: one token a nanosecond.
	b.interval = max(int64(time.Second)/int64(rps), 1)
	b.burst = b.interval * int64(rps)
	b.denied = Decision{Scope: scope, RequestsPerSecond: rps, Reason: reason(scope, rps)}
}

func reason(scope authz.RateLimitScope, rps uint32) string {
	switch scope {
	case authz.ScopeTotal:
		return fmt.Sprintf("total rate limit exceeded: %drps", rps)
	case authz.ScopeOverride:
		return fmt.Sprintf("override rate limit exceeded: %drps", rps)
	}
	return fmt.Sprintf("per-identity rate limit exceeded: %drps", rps)
}

// take admits a request at now, taking a token, or refuses it.
func (b *bucket) take(now int64) bool {
	for {
		old := b.tat.Load()
		tat := max(old, now)
		next := tat + b.interval
		if next-now > b.burst {
			return false
		}
		if b.tat.CompareAndSwap(old, next) {
			return true
		}
	}
}

// full reports whether the bucket has refilled by now, so that it is the
// same as a new one.
func (b *bucket) full(now int64) bool { return b.tat.Load() <= now }

// Limiter enforces one server's rate limit. It is safe for concurrent
// use. A nil *Limiter allows everything.
type Limiter struct {
	total     *bucket
	overrides map[string]*bucket
	perID     uint32 // 0: no per-identity limit
	anonymous bucket // clients without an identity

	now    func() time.Time
	start  time.Time
	maxIDs int

	mu        sync.RWMutex
	ids       map[string]*bucket
	overflow  bucket
	nextSweep int64
}

type config struct {
	now           func() time.Time
	maxIdentities int
}

// Option configures a Limiter.
type Option func(*config) error

// WithClock sets the clock (default time.Now). Only differences between
// its readings matter; they must not go backwards.
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("ratelimit: nil clock")
		}
		c.now = now
		return nil
	}
}

// WithMaxIdentities bounds the number of per-identity buckets (default
// DefaultMaxIdentities); see the package documentation.
func WithMaxIdentities(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("ratelimit: max identities must be at least 1, got %d", n)
		}
		c.maxIdentities = n
		return nil
	}
}

// New builds the limiter of rl, which must pass rl.Validate (as every
// rate limit authz.FromProto returns does). A nil rl yields a nil
// Limiter, which allows everything. Every bucket starts full.
func New(rl *authz.RateLimit, opts ...Option) (*Limiter, error) {
	cfg := config{now: time.Now, maxIdentities: DefaultMaxIdentities}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if rl == nil {
		return nil, nil
	}
	if err := rl.Validate(); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	l := &Limiter{now: cfg.now, maxIDs: cfg.maxIdentities, perID: rl.Identity, ids: map[string]*bucket{}}
	l.start = l.now()
	if rl.Total > 0 {
		l.total = newBucket(rl.Total, authz.ScopeTotal)
	}
	for _, o := range rl.Overrides {
		b := newBucket(o.RequestsPerSecond, authz.ScopeOverride)
		for _, id := range o.Identities {
			if l.overrides == nil {
				l.overrides = map[string]*bucket{}
			}
			l.overrides[id] = b
		}
	}
	if rl.Identity > 0 {
		l.anonymous.init(rl.Identity, authz.ScopeIdentity)
		l.overflow.init(rl.Identity, authz.ScopeIdentity)
	}
	return l, nil
}

var allowed = Decision{Allowed: true}

// Allow counts a request from a client with the given mesh identity (""
// for none) and says whether the limits admit it.
func (l *Limiter) Allow(identity string) Decision {
	if l == nil {
		return allowed
	}
	now := int64(l.now().Sub(l.start))
	if l.total != nil && !l.total.take(now) {
		return l.total.denied
	}
	if identity != "" {
		if b, ok := l.overrides[identity]; ok {
			if !b.take(now) {
				return b.denied
			}
			return allowed
		}
	}
	if l.perID == 0 {
		return allowed
	}
	if identity == "" {
		if !l.anonymous.take(now) {
			return l.anonymous.denied
		}
		return allowed
	}
	l.mu.RLock()
	b, ok := l.ids[identity]
	if ok {
		// Taken under the read lock, so that a sweep (write lock) never
		// drops a bucket between its lookup and its use.
		taken := b.take(now)
		l.mu.RUnlock()
		if !taken {
			return b.denied
		}
		return allowed
	}
	l.mu.RUnlock()
	return l.allowNew(identity, now)
}

// allowNew handles the first request of an identity without a bucket.
func (l *Limiter) allowNew(identity string, now int64) Decision {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.ids[identity]
	if !ok {
		if len(l.ids) >= l.maxIDs && now >= l.nextSweep {
			l.sweep(now)
		}
		if len(l.ids) >= l.maxIDs {
			b = &l.overflow
		} else {
			// A copy, so that the table does not keep alive whatever
			// larger buffer the caller's string points into.
			b = newBucket(l.perID, authz.ScopeIdentity)
			l.ids[strings.Clone(identity)] = b
		}
	}
	if !b.take(now) {
		return b.denied
	}
	return allowed
}

// sweep drops the buckets that have refilled and notes when the next
// remaining one will have. The caller holds the write lock.
func (l *Limiter) sweep(now int64) {
	next := int64(-1)
	for id, b := range l.ids {
		if b.full(now) {
			delete(l.ids, id)
			continue
		}
		if t := b.tat.Load(); next < 0 || t < next {
			next = t
		}
	}
	l.nextSweep = next
}

// Identities returns how many per-identity buckets the limiter holds.
func (l *Limiter) Identities() int {
	if l == nil {
		return 0
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.ids)
}
