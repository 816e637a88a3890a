package balance

import (
	"math"
	"strconv"
	"time"
)

// Accrual configures failure accrual: when an endpoint is taken out of
// the balancer (ejected), for how long, and how it comes back.
type Accrual struct {
	// MaxFailures is the run of failures that ejects an endpoint. Without
	// Unified, zero means the default 7; with Unified, zero turns the
	// consecutive-failure signal off.
	MaxFailures int
	// MinBackoff is the first ejection (default 1s); MaxBackoff the
	// longest (default one minute).
	MinBackoff, MaxBackoff time.Duration
	// Jitter is the share of a backoff added at random, 0..1 (default 0.5
	// when the whole Accrual is zero).
	Jitter float64

	// Unified is Linkerd's unified breaker: the consecutive-failure signal
	// and a success-rate signal, either of which ejects. Rate-limited
	// responses (429, gRPC RESOURCE_EXHAUSTED) count against the success
	// rate (not the run of failures) and never pass as a probe.
	Unified bool
	// SuccessRate is the success rate, 0..1, below which an endpoint is
	// ejected once its window holds MinRequests responses; zero turns the
	// signal off. Window is the length of the sliding window (default 10s,
	// at least 10ms).
	SuccessRate float64
	Window      time.Duration
	MinRequests int

	// RespectRetryAfter makes a Retry-After (or gRPC pushback) hint on the
	// response that ejects an endpoint the length of that ejection, kept
	// between MinBackoff and MaxBackoff.
	RespectRetryAfter bool
	// MinReady is the number of endpoints that stay in the balancer
	// whatever their breaker says; zero lets every endpoint be ejected.
	MinReady int
}

// DefaultAccrual is what Linkerd applies when consecutive-failure accrual
// is asked for without parameters.
func DefaultAccrual() Accrual {
	return Accrual{MaxFailures: 7, MinBackoff: time.Second, MaxBackoff: time.Minute, Jitter: 0.5}
}

// Bounds on the success-rate signal, as Linkerd's proxy enforces them.
const (
	minSuccessWindow   = 10 * time.Millisecond
	maxSuccessRequests = 1_000_000
	windowBuckets      = 10
)

func (a Accrual) withDefaults() Accrual {
	d := DefaultAccrual()
	if a.MaxFailures < 0 || (a.MaxFailures == 0 && !a.Unified) {
		a.MaxFailures = d.MaxFailures
	}
	if a.MinBackoff <= 0 {
		a.MinBackoff = d.MinBackoff
	}
	if a.MaxBackoff < a.MinBackoff {
		a.MaxBackoff = max(d.MaxBackoff, a.MinBackoff)
	}
	a.Jitter = min(max(a.Jitter, 0), 1)
	if math.IsNaN(a.SuccessRate) || a.SuccessRate < 0 {
		a.SuccessRate = 0
	}
	a.SuccessRate = min(a.SuccessRate, 1)
	if a.Window <= 0 {
		a.Window = 10 * time.Second
	}
	a.Window = max(a.Window, minSuccessWindow)
	a.MinRequests = min(max(a.MinRequests, 0), maxSuccessRequests)
	a.MinReady = max(a.MinReady, 0)
	if !a.Unified {
		a.SuccessRate = 0
	}
	return a
}

// Hint is what a response says about the endpoint's health, whatever the
// route's classification.
type Hint uint8

// Hints.
const (
	// HintNone: nothing wrong with the endpoint.
	HintNone Hint = iota
	// HintRateLimited: 429, or gRPC RESOURCE_EXHAUSTED.
	HintRateLimited
	// HintUnavailable: 503, or gRPC UNAVAILABLE.
	HintUnavailable
	// HintServerError: another 5xx, or gRPC UNKNOWN, DEADLINE_EXCEEDED,
	// INTERNAL or DATA_LOSS.
	HintServerError
)

// Classify reads the hint of a response: its HTTP status and, for a gRPC
// response whose status arrived with the headers, its grpc-status ("" when
// there is none). Statuses a client causes (4xx but 429, gRPC
// INVALID_ARGUMENT, ...) are not the endpoint's fault.
func Classify(status int, grpcStatus string) Hint {
	switch {
	case status == 429:
		return HintRateLimited
	case status == 503:
		return HintUnavailable
	case status >= 500 && status <= 599:
		return HintServerError
	case status == 200 && grpcStatus != "":
		code, err := strconv.Atoi(grpcStatus)
		if err != nil {
			return HintNone
		}
		switch code {
		case 8:
			return HintRateLimited
		case 14:
			return HintUnavailable
		case 2, 4, 13, 15:
			return HintServerError
		}
	}
	return HintNone
}

// Outcome is what a finished request tells the balancer.
type Outcome struct {
	// Failure is the route's verdict (a 5xx by default, or a connection
	// error): it feeds the run of failures and fails a probe.
	Failure bool
	// Hint is the response's own signal (Classify).
	Hint Hint
	// RetryAfter is the server's Retry-After or gRPC pushback hint, when
	// HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Penalty configures penalised peak EWMA: a response with a Hint counts
// as a request that took Penalty (or, for 429 and 503, the server's
// Retry-After hint when that is longer, cut to MaxRetryAfter), never less
// than the endpoint's current estimate, so power of two choices turns
// away from an endpoint that fails or sheds load.
type Penalty struct {
	// Penalty is the latency a failed response counts as (default 5s).
	Penalty time.Duration
	// MaxRetryAfter bounds the hints taken into account (default 5m).
	MaxRetryAfter time.Duration
}

func (p Penalty) withDefaults() Penalty {
	if p.Penalty <= 0 {
		p.Penalty = 5 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 5 * time.Minute
	}
	return p
}

// penaltyFor returns the latency, in ns, a response counts as under the
// penalised estimator, and false when it counts as measured.
func (b *Balancer[T]) penaltyFor(o Outcome) (float64, bool) {
	if b.penalty == nil || o.Hint == HintNone {
		return 0, false
	}
	pen := b.penalty.Penalty
	if (o.Hint == HintRateLimited || o.Hint == HintUnavailable) && o.HasRetryAfter {
		pen = max(pen, min(o.RetryAfter, b.penalty.MaxRetryAfter))
	}
	return float64(pen), true
}

// window counts successes over a sliding window of fixed buckets.
type window struct {
	width   int64 // ns per bucket
	buckets [windowBuckets]struct {
		slot      int64 // now / width when the bucket was last used
		ok, total uint32
	}
}

func newWindow(d time.Duration) *window {
	return &window{width: max(int64(d)/windowBuckets, int64(time.Millisecond))}
}

func (w *window) record(success bool, now int64) {
	slot := now / w.width
	b := &w.buckets[int(uint64(slot)%windowBuckets)]
	if b.slot != slot {
		b.slot, b.ok, b.total = slot, 0, 0
	}
	b.total++
	if success {
		b.ok++
	}
}

// rate returns the successes and responses in the window ending now.
func (w *window) rate(now int64) (ok, total uint32) {
	slot := now / w.width
	for _, b := range w.buckets {
		if b.slot > slot-windowBuckets && b.slot <= slot {
			ok += b.ok
			total += b.total
		}
	}
	return ok, total
}

// accrue feeds one outcome to failure accrual; e.mu is held.
func (b *Balancer[T]) accrue(e *endpoint[T], probe bool, o Outcome, now int64) {
	a := b.accrual
	rateLimited := o.Hint == HintRateLimited
	switch {
	case probe:
		e.probing = false
		if !o.Failure && !(a.Unified && rateLimited) {
			// Recovered: start cold again.
			e.state, e.failures, e.step, e.window = healthy, 0, 0, nil
			return
		}
		b.eject(e, o, now)
	case e.state != healthy:
		// A request that started before the ejection: it neither
		// restores nor extends it.
	default:
		if a.MaxFailures > 0 {
			switch {
			case a.Unified && rateLimited:
				// Counts against the success rate only, whatever the
				// route calls it (gRPC RESOURCE_EXHAUSTED is a failure
				// to the route, a 429 is not): the run neither grows nor
				// resets.
			case o.Failure:
				e.failures++
			default:
				e.failures = 0
			}
		}
		trip := a.MaxFailures > 0 && e.failures >= a.MaxFailures
		if a.SuccessRate > 0 {
			if e.window == nil {
				e.window = newWindow(a.Window)
			}
			e.window.record(!o.Failure && !rateLimited, now)
			ok, total := e.window.rate(now)
			trip = trip || (total > 0 && int(total) >= a.MinRequests && float64(ok)/float64(total) < a.SuccessRate)
		}
		if trip {
			b.eject(e, o, now)
		}
	}
}

// eject takes e out for its next backoff; e.mu is held. o is the outcome
// that tripped the breaker. With MinReady, an ejection that would leave
// fewer endpoints in the balancer does not happen: e stays in, its
// counts start again.
func (b *Balancer[T]) eject(e *endpoint[T], o Outcome, now int64) {
	a := b.accrual
	if a.MinReady > 0 && b.readyExcept(e, now) < a.MinReady {
		e.state, e.failures, e.probing, e.window = healthy, 0, false, nil
		return
	}
	d := float64(a.MinBackoff) * math.Pow(2, float64(e.step))
	if d > float64(a.MaxBackoff) || math.IsInf(d, 1) {
		d = float64(a.MaxBackoff)
	}
	if a.Jitter > 0 {
		d += d * a.Jitter * float64(b.intn(1000)) / 1000
	}
	if a.RespectRetryAfter && o.HasRetryAfter {
		d = float64(min(max(o.RetryAfter, a.MinBackoff), a.MaxBackoff))
	}
	e.state, e.until, e.failures, e.probing = ejected, now+int64(d), 0, false
	e.ejectedUntil.Store(e.until)
	if e.step < 32 {
		e.step++
	}
}

// readyExcept counts the endpoints other than e that are not ejected now.
// It reads each endpoint's ejectedUntil without its lock, so concurrent
// ejections may each see the other as ready: the floor is kept for
// requests that finish one after another.
func (b *Balancer[T]) readyExcept(e *endpoint[T], now int64) int {
	n := 0
	for _, x := range *b.eps.Load() {
		if x != e && x.ejectedUntil.Load() <= now {
			n++
		}
	}
	return n
}
