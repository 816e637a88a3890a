package balance

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of Pick.
var (
	// ErrNoEndpoints means the balancer has no endpoints at all.
	ErrNoEndpoints = errors.New("balance: no endpoints")
	// ErrUnavailable means every endpoint is ejected by failure accrual
	// (or waiting on its probe).
	ErrUnavailable = errors.New("balance: no endpoint available")
)

// Options tune a Balancer. Zero fields take the defaults.
type Options struct {
	// DefaultRTT is the cost assumed for an endpoint before its first
	// response (default 30ms).
	DefaultRTT time.Duration
	// Decay is the time constant of the moving average (default 10s).
	Decay time.Duration
	// Accrual enables failure accrual; nil disables it.
	Accrual *Accrual
	// Penalty turns peak EWMA into its penalised form: a failed or
	// rate-limited response counts as a slow one; nil disables it.
	Penalty *Penalty
	// Now is the clock (default time.Now).
	Now func() time.Time
	// IntN returns a random int in [0, n) (default math/rand/v2.IntN).
	IntN func(n int) int
}

// Item is an endpoint given to Update. Endpoints are told apart by Key;
// an item whose key was already present keeps that endpoint's statistics
// (its Value and Weight are replaced).
type Item[T any] struct {
	Key    string
	Weight uint32 // 0 counts as 1
	Value  T
}

// Balancer picks endpoints. It is safe for concurrent use.
type Balancer[T any] struct {
	defaultRTT float64
	decay      float64
	accrual    *Accrual
	penalty    *Penalty
	now        func() time.Time
	intn       func(int) int

	mu  sync.Mutex // serialises Update
	eps atomic.Pointer[[]*endpoint[T]]
}

// New returns an empty balancer.
func New[T any](o Options) *Balancer[T] {
	b := &Balancer[T]{
		defaultRTT: float64(30 * time.Millisecond),
		decay:      float64(10 * time.Second),
		now:        time.Now,
		intn:       rand.IntN,
	}
	if o.DefaultRTT > 0 {
		b.defaultRTT = float64(o.DefaultRTT)
	}
	if o.Decay > 0 {
		b.decay = float64(o.Decay)
	}
	if o.Accrual != nil {
		a := o.Accrual.withDefaults()
		b.accrual = &a
	}
	if o.Penalty != nil {
		p := o.Penalty.withDefaults()
		b.penalty = &p
	}
	if o.Now != nil {
		b.now = o.Now
	}
	if o.IntN != nil {
		b.intn = o.IntN
	}
	empty := []*endpoint[T]{}
	b.eps.Store(&empty)
	return b
}

type state uint8

const (
	healthy state = iota
	ejected
	probation
)

type endpoint[T any] struct {
	key string

	mu      sync.Mutex
	weight  float64
	value   T
	cost    float64 // ns
	stamp   int64   // unix ns of the last cost update
	pending int64

	failures int
	state    state
	until    int64 // unix ns: end of the ejection
	step     int   // ejections in a row
	probing  bool
	window   *window // success rate, for a unified breaker

	// ejectedUntil mirrors until while the endpoint is ejected (0
	// otherwise), readable without e.mu for the ejection floor.
	ejectedUntil atomic.Int64
}

// Update replaces the endpoint set.
func (b *Balancer[T]) Update(items []Item[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := map[string]*endpoint[T]{}
	for _, e := range *b.eps.Load() {
		old[e.key] = e
	}
	now := b.now().UnixNano()
	next := make([]*endpoint[T], 0, len(items))
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.Key] {
			continue
		}
		seen[it.Key] = true
		w := float64(it.Weight)
		if w <= 0 {
			w = 1
		}
		e := old[it.Key]
		if e == nil {
			e = &endpoint[T]{key: it.Key, cost: b.defaultRTT, stamp: now}
		}
		e.mu.Lock()
		e.weight, e.value = w, it.Value
		e.mu.Unlock()
		next = append(next, e)
	}
	b.eps.Store(&next)
}

// Len reports how many endpoints the balancer has.
func (b *Balancer[T]) Len() int { return len(*b.eps.Load()) }

// Available reports how many endpoints could take a request now.
func (b *Balancer[T]) Available() int {
	now := b.now().UnixNano()
	n := 0
	for _, e := range *b.eps.Load() {
		e.mu.Lock()
		if b.available(e, now) {
			n++
		}
		e.mu.Unlock()
	}
	return n
}

// Handle is one request's use of an endpoint. Done must be called once.
type Handle[T any] struct {
	b *Balancer[T]
	e *endpoint[T]
	// value is the endpoint's value when it was picked; Update may replace
	// the endpoint's value while the request runs.
	value T
	start int64
	probe bool
	done  atomic.Bool
}

// Value returns the chosen endpoint's value.
func (h *Handle[T]) Value() T { return h.value }

// Key returns the chosen endpoint's key.
func (h *Handle[T]) Key() string { return h.e.key }

// Pick chooses an endpoint by power of two choices among those not
// ejected. It fails with ErrNoEndpoints or ErrUnavailable.
func (b *Balancer[T]) Pick() (*Handle[T], error) {
	return b.PickExcept(nil)
}

// PickExcept is Pick avoiding the endpoints of the given handles (earlier
// attempts of the same request) while others are available.
func (b *Balancer[T]) PickExcept(avoid []*Handle[T]) (*Handle[T], error) {
	eps := *b.eps.Load()
	n := len(eps)
	if n == 0 {
		return nil, ErrNoEndpoints
	}
	now := b.now().UnixNano()
	avoided := func(e *endpoint[T]) bool {
		for _, h := range avoid {
			if h != nil && h.e == e {
				return true
			}
		}
		return false
	}
	var chosen *endpoint[T]
	if n == 1 {
		chosen = eps[0]
	} else {
		i := b.intn(n)
		j := b.intn(n - 1)
		if j >= i {
			j++
		}
		a, c := eps[i], eps[j]
		la, oka := b.loadIf(a, now)
		lc, okc := b.loadIf(c, now)
		oka = oka && !avoided(a)
		okc = okc && !avoided(c)
		switch {
		case oka && okc:
			chosen = a
			if lc < la {
				chosen = c
			}
		case oka:
			chosen = a
		case okc:
			chosen = c
		default:
			// Both draws unusable: the least loaded usable endpoint.
			best := math.Inf(1)
			for _, e := range eps {
				if l, ok := b.loadIf(e, now); ok && !avoided(e) && l < best {
					chosen, best = e, l
				}
			}
			if chosen == nil && len(avoid) > 0 {
				for _, e := range eps {
					if l, ok := b.loadIf(e, now); ok && l < best {
						chosen, best = e, l
					}
				}
			}
		}
	}
	if chosen == nil {
		return nil, ErrUnavailable
	}
	chosen.mu.Lock()
	defer chosen.mu.Unlock()
	if !b.available(chosen, now) {
		return nil, ErrUnavailable
	}
	h := &Handle[T]{b: b, e: chosen, value: chosen.value, start: now}
	if chosen.state == probation {
		chosen.probing = true
		h.probe = true
	}
	chosen.pending++
	return h, nil
}

// loadIf returns an endpoint's load and whether it can take a request.
func (b *Balancer[T]) loadIf(e *endpoint[T], now int64) (float64, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !b.available(e, now) {
		return 0, false
	}
	cost := b.decayed(e, now)
	if cost == 0 && e.pending > 0 {
		return penalty + float64(e.pending), true
	}
	return cost * float64(e.pending+1) / e.weight, true
}

// penalty is the load of an endpoint with requests in flight and no
// latency estimate: large enough that any measured endpoint is preferred.
const penalty = float64(time.Minute)

// available reports whether e may take a request now; e.mu is held. An
// ejected endpoint whose backoff is over moves to probation.
func (b *Balancer[T]) available(e *endpoint[T], now int64) bool {
	switch e.state {
	case ejected:
		if now < e.until {
			return false
		}
		e.state, e.probing = probation, false
		e.ejectedUntil.Store(0)
		return true
	case probation:
		return !e.probing
	}
	return true
}

// decayed decays the cost towards zero for the time since the last
// update; e.mu is held.
func (b *Balancer[T]) decayed(e *endpoint[T], now int64) float64 {
	if el := now - e.stamp; el > 0 {
		e.cost *= math.Exp(-float64(el) / b.decay)
		e.stamp = now
	}
	return e.cost
}

// Done records the outcome of the request: its latency (from Pick to now)
// feeds the estimate, and ok feeds failure accrual. Calls after the first
// are ignored. It is DoneWith(Outcome{Failure: !ok}).
func (h *Handle[T]) Done(ok bool) { h.DoneWith(Outcome{Failure: !ok}) }

// DoneWith records the outcome of the request: its latency (from Pick to
// now, or a penalty for a failed response under Options.Penalty) feeds the
// estimate, and the outcome feeds failure accrual. Calls after the first
// (of Done or DoneWith) are ignored.
func (h *Handle[T]) DoneWith(o Outcome) {
	if !h.done.CompareAndSwap(false, true) {
		return
	}
	b, e := h.b, h.e
	now := b.now().UnixNano()
	rtt := float64(now - h.start)
	if rtt < 0 {
		rtt = 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pending--
	if pen, ok := b.penaltyFor(o); ok {
		// A failed response enters the estimate as the penalty, never
		// below the current estimate: a failing endpoint must not look
		// faster than one that answers.
		rtt = max(pen, b.decayed(e, now))
	}
	// Peak EWMA: a slower sample replaces the estimate; a faster one pulls
	// it down in proportion to the time since the last sample.
	if el := now - e.stamp; el > 0 || rtt > e.cost {
		if rtt > e.cost {
			e.cost = rtt
		} else {
			w := math.Exp(-float64(el) / b.decay)
			e.cost = e.cost*w + rtt*(1-w)
		}
		e.stamp = now
	}
	if b.accrual != nil {
		b.accrue(e, h.probe, o, now)
	}
}

// Snapshot describes an endpoint for tests and diagnostics.
type Snapshot struct {
	Key      string
	Cost     time.Duration
	Pending  int64
	Ejected  bool
	Until    time.Time
	Failures int
}

// Snapshot returns the endpoints' current state.
func (b *Balancer[T]) Snapshot() []Snapshot {
	now := b.now().UnixNano()
	var out []Snapshot
	for _, e := range *b.eps.Load() {
		e.mu.Lock()
		s := Snapshot{Key: e.key, Cost: time.Duration(b.decayed(e, now)), Pending: e.pending, Failures: e.failures}
		if e.state == ejected && now < e.until {
			s.Ejected, s.Until = true, time.Unix(0, e.until)
		}
		e.mu.Unlock()
		out = append(out, s)
	}
	return out
}
