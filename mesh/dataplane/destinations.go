package dataplane

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/apis/proxy/outbound"
)

// destinations shares one discovery watch per target among connections,
// keeps the last endpoint set when the watch breaks, and drops targets
// nobody used for a while.
type destinations struct {
	p  *Proxy
	mu sync.Mutex
	m  map[string]*destination
}

type destination struct {
	target   string
	set      atomic.Pointer[endpointSet]
	ready    chan struct{}
	err      error           // valid once ready is closed and set is nil
	ctx      context.Context // ends when the destination is dropped
	cancel   context.CancelFunc
	lastUsed atomic.Int64
	users    atomic.Int32

	svcMu sync.Mutex
	svc   *service // HTTP state, created on first HTTP use

	egress     bool                                    // an address no Service has, under an EgressNetwork (outbound_egress.go)
	egressRead atomic.Pointer[outbound.OutboundPolicy] // its last policy the proxy could read (outbound_egress.go)
}

type endpointSet struct {
	eps    []*balanced
	opaque bool
}

// balanced is an endpoint with its count of open connections.
type balanced struct {
	Endpoint
	active atomic.Int64
}

func newDestinations(p *Proxy) *destinations {
	return &destinations{p: p, m: map[string]*destination{}}
}

// get returns the destination of target, starting its watch if needed and
// waiting up to the resolve timeout for its first endpoint set. The caller
// must call release when its connection ends.
func (ds *destinations) get(ctx context.Context, target string) (*destination, error) {
	ds.mu.Lock()
	if ds.m == nil {
		ds.mu.Unlock()
		return nil, errors.New("dataplane: proxy is stopping")
	}
	d := ds.m[target]
	if d == nil {
		wctx, cancel := context.WithCancel(ds.p.runCtx)
		d = &destination{target: target, ready: make(chan struct{}), ctx: wctx, cancel: cancel}
		ds.m[target] = d
		go ds.watch(wctx, d)
	}
	d.users.Add(1)
	d.lastUsed.Store(time.Now().UnixNano())
	ds.mu.Unlock()

	timer := time.NewTimer(ds.p.cfg.ResolveTimeout)
	defer timer.Stop()
	select {
	case <-d.ready:
	case <-timer.C:
		d.release()
		return nil, fmt.Errorf("dataplane: resolving %s: no answer within %s", target, ds.p.cfg.ResolveTimeout)
	case <-ctx.Done():
		d.release()
		return nil, ctx.Err()
	}
	if d.set.Load() == nil {
		d.release()
		return nil, d.err
	}
	return d, nil
}

func (d *destination) release() {
	d.lastUsed.Store(time.Now().UnixNano())
	d.users.Add(-1)
}

func (ds *destinations) remove(d *destination) {
	ds.mu.Lock()
	if ds.m != nil && ds.m[d.target] == d {
		delete(ds.m, d.target)
	}
	ds.mu.Unlock()
	d.cancel()
}

// watch runs the discovery watch of d until its context ends.
func (ds *destinations) watch(ctx context.Context, d *destination) {
	first := true
	backoff := 50 * time.Millisecond
	for {
		ch, err := ds.p.resolver.Resolve(ctx, d.target)
		if err == nil {
			for eps := range ch {
				d.set.Store(newEndpointSet(eps, d.set.Load()))
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
		ds.p.log.Warn("destination watch broken, keeping last endpoints", "target", d.target, "err", err, "retry_in", backoff)
		select {
		case <-time.After(jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// janitor drops destinations unused for the idle timeout.
func (ds *destinations) janitor(ctx context.Context) {
	t := time.NewTicker(max(ds.p.destIdle/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cutoff := time.Now().Add(-ds.p.destIdle).UnixNano()
		ds.mu.Lock()
		for k, d := range ds.m {
			if d.users.Load() <= 0 && d.lastUsed.Load() < cutoff {
				delete(ds.m, k)
				d.cancel()
			}
		}
		ds.mu.Unlock()
		if ds.p.http != nil {
			ds.p.http.pool.Sweep()
			ds.p.http.peerH1.Sweep()
			ds.p.http.appH1.Sweep()
			ds.p.http.extH1.Sweep()
		}
	}
}

func (ds *destinations) closeAll() {
	ds.mu.Lock()
	m := ds.m
	ds.m = nil
	ds.mu.Unlock()
	for _, d := range m {
		d.cancel()
	}
}

// newEndpointSet builds a set, keeping the connection counts of endpoints
// that were already there.
func newEndpointSet(eps []Endpoint, prev *endpointSet) *endpointSet {
	s := &endpointSet{eps: make([]*balanced, 0, len(eps))}
	for _, e := range eps {
		b := &balanced{Endpoint: e}
		if prev != nil {
			for _, o := range prev.eps {
				if o.Addr == e.Addr {
					b.active.Store(o.active.Load())
					break
				}
			}
		}
		s.eps = append(s.eps, b)
		s.opaque = s.opaque || e.Protocol == HintOpaque
	}
	return s
}

// pick chooses an endpoint by power of two choices over open connections
// divided by weight, skipping the tried ones. It returns nil when none is
// left.
func (s *endpointSet) pick(tried []*balanced) *balanced {
	var cands [2]*balanced
	n := 0
	free := make([]*balanced, 0, len(s.eps))
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

func load(b *balanced) float64 {
	w := float64(b.Weight)
	if w <= 0 {
		w = 1
	}
	return float64(b.active.Load()+1) / w
}

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
