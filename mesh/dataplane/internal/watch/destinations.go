package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
)

// Resolver is the discovery source: the proxy's dataplane.Resolver.
// Resolve sends the target's whole endpoint set on each change and
// closes the channel when the watch ends.
type Resolver interface {
	Resolve(ctx context.Context, target string) (<-chan []endpoint.Endpoint, error)
}

// DestinationSettings is what a [Destinations] cache is given.
type DestinationSettings struct {
	// Resolver answers the watches. Get must not be called when it is
	// nil.
	Resolver Resolver
	// Lifetime returns the context the watches run under (the proxy's
	// run context, set when it starts serving). It is called when a
	// destination is made, never before.
	Lifetime func() context.Context
	// ResolveTimeout bounds the wait of Get for a target's first
	// endpoint set.
	ResolveTimeout time.Duration
	// Idle is how long a destination nobody uses keeps its watch.
	Idle time.Duration
	// Sweep, when set, is called after each round of the janitor (the
	// proxy sweeps its pools to upstreams there).
	Sweep func()
	// Log gets the broken watches.
	Log *slog.Logger
}

// Destinations shares one discovery watch per target among connections,
// keeps the last endpoint set when the watch breaks, and drops targets
// nobody used for a while. X is the state the caller hangs on each
// destination ([Destination.Ext]).
type Destinations[X any] struct {
	s  DestinationSettings
	mu sync.Mutex
	m  map[string]*Destination[X]
}

// Destination is one target's watch: its current endpoint set and its
// users.
type Destination[X any] struct {
	target   string
	set      atomic.Pointer[Set]
	ready    chan struct{}
	err      error           // valid once ready is closed and set is nil
	ctx      context.Context // ends when the destination is dropped
	cancel   context.CancelFunc
	lastUsed atomic.Int64
	users    atomic.Int32

	// Ext is the caller's state for this destination (the proxy's
	// outbound HTTP service and egress fields). Its zero value is what
	// a new destination starts with; it lives as long as the
	// destination.
	Ext X
}

// Set is an endpoint set as discovery last sent it. It is not changed
// once made: a new answer makes a new Set.
type Set struct {
	eps    []*Balanced
	opaque bool
}

// Balanced is an endpoint with its count of open connections.
type Balanced struct {
	endpoint.Endpoint
	// Active is the count of open connections to the endpoint; the
	// caller adds one when it opens one and takes it away when it ends.
	Active atomic.Int64
}

// NewDestinations returns an empty cache. It starts nothing: watches
// start with Get, the janitor with Janitor.
func NewDestinations[X any](s DestinationSettings) *Destinations[X] {
	return &Destinations[X]{s: s, m: map[string]*Destination[X]{}}
}

// Get returns the destination of target, starting its watch if needed and
// waiting up to the resolve timeout for its first endpoint set. The caller
// must call Release when its connection ends.
func (ds *Destinations[X]) Get(ctx context.Context, target string) (*Destination[X], error) {
	ds.mu.Lock()
	if ds.m == nil {
		ds.mu.Unlock()
		return nil, errors.New("dataplane: proxy is stopping")
	}
	d := ds.m[target]
	if d == nil {
		wctx, cancel := context.WithCancel(ds.s.Lifetime())
		d = &Destination[X]{target: target, ready: make(chan struct{}), ctx: wctx, cancel: cancel}
		ds.m[target] = d
		go ds.watch(wctx, d)
	}
	d.users.Add(1)
	d.lastUsed.Store(time.Now().UnixNano())
	ds.mu.Unlock()

	timer := time.NewTimer(ds.s.ResolveTimeout)
	defer timer.Stop()
	select {
	case <-d.ready:
	case <-timer.C:
		d.Release()
		return nil, fmt.Errorf("dataplane: resolving %s: no answer within %s", target, ds.s.ResolveTimeout)
	case <-ctx.Done():
		d.Release()
		return nil, ctx.Err()
	}
	if d.set.Load() == nil {
		d.Release()
		return nil, d.err
	}
	return d, nil
}

// Fixed returns the destination kept under key, making it when there is
// none: a destination of target with the fixed endpoint set eps and no
// watch (the proxy's egress destinations, whose one endpoint is the
// original destination). init, when set, fills a new destination's Ext
// before anyone else sees it. key must not be a target Get is asked for.
// Fixed returns nil when the cache is closed. The caller must call
// Release when its connection ends; the janitor drops the destination
// like the others.
func (ds *Destinations[X]) Fixed(key, target string, eps []endpoint.Endpoint, init func(*X)) *Destination[X] {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.m == nil {
		return nil
	}
	d := ds.m[key]
	if d == nil {
		wctx, cancel := context.WithCancel(ds.s.Lifetime())
		d = &Destination[X]{target: target, ready: make(chan struct{}), ctx: wctx, cancel: cancel}
		if init != nil {
			init(&d.Ext)
		}
		d.set.Store(newSet(eps, nil))
		close(d.ready)
		ds.m[key] = d
	}
	d.users.Add(1)
	d.lastUsed.Store(time.Now().UnixNano())
	return d
}

// Target returns the destination's target.
func (d *Destination[X]) Target() string { return d.target }

// Set returns the destination's current endpoint set (never nil once Get
// or Fixed returned the destination).
func (d *Destination[X]) Set() *Set { return d.set.Load() }

// Context returns a context that ends when the destination is dropped
// (unused for the idle timeout, or the cache closed): state hung on the
// destination runs its own watches under it.
func (d *Destination[X]) Context() context.Context { return d.ctx }

// Release ends one use of the destination (one for each Get or Fixed).
func (d *Destination[X]) Release() {
	d.lastUsed.Store(time.Now().UnixNano())
	d.users.Add(-1)
}

func (ds *Destinations[X]) remove(d *Destination[X]) {
	ds.mu.Lock()
	if ds.m != nil && ds.m[d.target] == d {
		delete(ds.m, d.target)
	}
	ds.mu.Unlock()
	d.cancel()
}

// watch runs the discovery watch of d until its context ends.
func (ds *Destinations[X]) watch(ctx context.Context, d *Destination[X]) {
	first := true
	backoff := 50 * time.Millisecond
	for {
		ch, err := ds.s.Resolver.Resolve(ctx, d.target)
		if err == nil {
			for eps := range ch {
				d.set.Store(newSet(eps, d.set.Load()))
				if first {
					first = false
					close(d.ready)
				}
				backoff = 50 * time.Millisecond
			}
			if ctx.Err() != nil {
				if first {
					d.err = ctx.Err()
					close(d.ready)
				}
				return
			}
			err = errors.New("watch ended")
		}
		if first {
			d.err = fmt.Errorf("dataplane: resolving %s: %w", d.target, err)
			close(d.ready)
			ds.remove(d)
			return
		}
		ds.s.Log.Warn("destination watch broken, keeping last endpoints", "target", d.target, "err", err, "retry_in", backoff)
		select {
		case <-time.After(Jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Janitor drops destinations unused for the idle timeout, until ctx
// ends: every half of it (at least every 10 ms), the destinations with no
// user whose last use is older than the timeout lose their watch.
func (ds *Destinations[X]) Janitor(ctx context.Context) {
	t := time.NewTicker(max(ds.s.Idle/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-ds.s.Idle).UnixNano()
		ds.mu.Lock()
		for k, d := range ds.m {
			if d.users.Load() <= 0 && d.lastUsed.Load() < cutoff {
				delete(ds.m, k)
				d.cancel()
			}
		}
		ds.mu.Unlock()
		if ds.s.Sweep != nil {
			ds.s.Sweep()
		}
	}
}

// CloseAll ends every watch; Get fails and Fixed returns nil from then
// on.
func (ds *Destinations[X]) CloseAll() {
	ds.mu.Lock()
	m := ds.m
	ds.m = nil
	ds.mu.Unlock()
	for _, d := range m {
		d.cancel()
	}
}

// newSet builds a set, keeping the connection counts of endpoints
// that were already there.
func newSet(eps []endpoint.Endpoint, prev *Set) *Set {
	s := &Set{eps: make([]*Balanced, 0, len(eps))}
	for _, e := range eps {
		b := &Balanced{Endpoint: e}
		if prev != nil {
			for _, o := range prev.eps {
				if o.Addr == e.Addr {
					b.Active.Store(o.Active.Load())
					break
				}
			}
		}
		s.eps = append(s.eps, b)
		s.opaque = s.opaque || e.Protocol == endpoint.HintOpaque
	}
	return s
}

// Endpoints returns the set's endpoints; the caller must not change the
// slice.
func (s *Set) Endpoints() []*Balanced { return s.eps }

// Opaque reports whether an endpoint of the set has the opaque protocol
// hint: the proxy then skips protocol detection.
func (s *Set) Opaque() bool { return s.opaque }

// Pick chooses an endpoint by power of two choices over open connections
// divided by weight, skipping the tried ones. It returns nil when none is
// left.
func (s *Set) Pick(tried []*Balanced) *Balanced {
	var cands [2]*Balanced
	n := 0
	free := make([]*Balanced, 0, len(s.eps))
	for _, e := range s.eps {
		skip := false
		for _, t := range tried {
			skip = skip || t == e
		}
		if !skip {
			free = append(free, e)
		}
	}
	switch len(free) {
	case 0:
		return nil
	case 1:
		return free[0]
	}
	i := rand.IntN(len(free))
	j := rand.IntN(len(free) - 1)
	if j >= i {
		j++
	}
	cands[0], cands[1] = free[i], free[j]
	n = 2
	best := cands[0]
	for _, c := range cands[1:n] {
		if load(c) < load(best) {
			best = c
		}
	}
	return best
}

func load(b *Balanced) float64 {
	w := float64(b.Weight)
	if w <= 0 {
		w = 1
	}
	return float64(b.Active.Load()+1) / w
}

// Jitter returns a duration between d/2 and d, at random: the wait
// before a broken watch asks again, so that proxies that lost the same
// control plane do not all come back at once.
func Jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
