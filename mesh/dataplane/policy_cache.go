package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
)

// policyCache holds one policy watch per inbound port.
type policyCache struct {
	p  *Proxy
	mu sync.Mutex
	m  map[uint32]*portPolicy
}

// portState is a port's current policy (internal/inbound reads it, and
// the L4 inbound path).
type portState = inboundhttp.Policy

type portPolicy struct {
	cur    atomic.Pointer[portState]
	ready  chan struct{}
	cancel context.CancelFunc
}

// maxWatchedPorts bounds the policy watches a proxy keeps.
const maxWatchedPorts = 1024

func newPolicyCache(p *Proxy) *policyCache { return &policyCache{p: p, m: map[uint32]*portPolicy{}} }

func (pc *policyCache) start(port uint32) (*portPolicy, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		return nil, errors.New("dataplane: proxy is stopping")
	}
	if pp := pc.m[port]; pp != nil {
		return pp, nil
	}
	if len(pc.m) >= maxWatchedPorts {
		return nil, fmt.Errorf("dataplane: more than %d inbound ports in use", maxWatchedPorts)
	}
	ctx, cancel := context.WithCancel(pc.p.runCtx)
	pp := &portPolicy{ready: make(chan struct{}), cancel: cancel}
	pc.m[port] = pp
	go pc.watch(ctx, port, pp)
	return pp, nil
}

func (pc *policyCache) has(port uint32) bool {
	if pc.p.policies == nil {
		return true
	}
	pc.mu.Lock()
	pp := pc.m[port]
	pc.mu.Unlock()
	return pp != nil && pp.cur.Load() != nil
}

// get returns the current policy of port, waiting up to the policy timeout
// for the first one.
func (pc *policyCache) get(ctx context.Context, port uint32) (*portState, error) {
	if pc.p.policies == nil {
		return pc.p.defaultState, nil
	}
	pp, err := pc.start(port)
	if err != nil {
		return nil, err
	}
	if s := pp.cur.Load(); s != nil {
		return s, nil
	}
	timer := time.NewTimer(pc.p.cfg.PolicyTimeout)
	defer timer.Stop()
	select {
	case <-pp.ready:
		return pp.cur.Load(), nil
	case <-timer.C:
		return nil, fmt.Errorf("dataplane: no policy for port %d within %s", port, pc.p.cfg.PolicyTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watch keeps the latest policy of a port; when the stream breaks it keeps
// the last one and asks again with backoff. A source that knows nothing of
// the port yields the configured default policy. A policy the shared
// evaluator refuses (a newer control plane's matchers, a malformed
// message) is not applied: the last good one stays, or, before any, the
// port denies everything.
func (pc *policyCache) watch(ctx context.Context, port uint32, pp *portPolicy) {
	backoff := 50 * time.Millisecond
	publish := func(s *portState) {
		if pp.cur.Swap(s) == nil {
			close(pp.ready)
		}
	}
	for {
		ch, err := pc.p.policies.Watch(ctx, port)
		if err == nil {
			for s := range ch {
				if s == nil {
					continue
				}
				srv, cerr := compilePolicy(s)
				var lim *inboundhttp.Limit
				if cerr == nil {
					lim, cerr = inboundhttp.LimitFor(pp.cur.Load(), srv, pc.p.now)
				}
				if cerr != nil {
					pc.p.log.Warn("inbound policy refused", "port", port, "err", cerr)
					pc.p.m.policyRefused.Inc()
					if pp.cur.Load() == nil {
						publish(&portState{Proto: s, Srv: denyAllPolicy("invalid-policy")})
					}
					continue
				}
				publish(&portState{Proto: s, Srv: srv, Limit: lim})
				backoff = 50 * time.Millisecond
			}
			if ctx.Err() != nil {
				return
			}
		} else if errors.Is(err, ErrNotFound) {
			// The source has no policy for this port: the default applies
			// until it has one.
			if pp.cur.Load() == nil {
				publish(pc.p.defaultState)
			}
			backoff = max(backoff, 5*time.Second)
			pc.p.log.Debug("no policy for port, using the default", "port", port, "default", pc.p.cfg.DefaultInboundPolicy)
		} else {
			pc.p.log.Warn("policy watch broken, keeping last policy", "port", port, "err", err, "retry_in", backoff)
		}
		select {
		case <-time.After(jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func (pc *policyCache) closeAll() {
	pc.mu.Lock()
	m := pc.m
	pc.m = nil
	pc.mu.Unlock()
	for _, pp := range m {
		pp.cancel()
	}
}
