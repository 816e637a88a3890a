package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/apis/proxy/inbound"
)

// Policies is the inbound policy source: the proxy's
// dataplane.InboundPolicies. Watch sends the port's policy on each change
// and closes the channel when the watch ends.
type Policies interface {
	Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error)
}

// PortSettings is what a [Ports] cache is given. S is the state the
// proxy keeps of a port's policy (its compiled form).
type PortSettings[S any] struct {
	// Policies answers the watches. When nil, every port has Default
	// and no watch starts.
	Policies Policies
	// Lifetime returns the context the watches run under (the proxy's
	// run context, set when it starts serving). It is called when a
	// port's watch starts, never before.
	Lifetime func() context.Context
	// Timeout bounds the wait of Get for a port's first policy.
	Timeout time.Duration
	// Default is the state of a port the source knows nothing of (its
	// Watch fails with an error wrapping NotFound), and of every port
	// without a source. DefaultName names it in the logs.
	Default     *S
	DefaultName string
	// NotFound is the error a source wraps when it has no policy for a
	// port (dataplane.ErrNotFound).
	NotFound error
	// Read compiles a policy the source sent, given the port's current
	// state (nil before the first). An error refuses the policy: it is
	// not applied.
	Read func(prev *S, pol *inbound.Server) (*S, error)
	// Refuse is called for each policy Read refused (the proxy counts
	// it). What it returns becomes the port's state when the port has
	// none yet (a deny-everything state); otherwise the last good state
	// stays.
	Refuse func(pol *inbound.Server) *S
	// Log gets the refused policies and broken watches.
	Log *slog.Logger
}

// Ports holds one policy watch per inbound port.
type Ports[S any] struct {
	s  PortSettings[S]
	mu sync.Mutex
	m  map[uint32]*port[S]
}

type port[S any] struct {
	cur    atomic.Pointer[S]
	ready  chan struct{}
	cancel context.CancelFunc
}

// MaxPorts bounds the policy watches a cache keeps: a port past it gets
// an error, not a watch.
const MaxPorts = 1024

// NewPorts returns an empty cache. It starts nothing: watches start with
// Start or Get.
func NewPorts[S any](s PortSettings[S]) *Ports[S] {
	return &Ports[S]{s: s, m: map[uint32]*port[S]{}}
}

// Start starts the policy watch of port, if it has none.
func (pc *Ports[S]) Start(p uint32) error {
	_, err := pc.start(p)
	return err
}

func (pc *Ports[S]) start(p uint32) (*port[S], error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.m == nil {
		return nil, errors.New("dataplane: proxy is stopping")
	}
	if pp := pc.m[p]; pp != nil {
		return pp, nil
	}
	if len(pc.m) >= MaxPorts {
		return nil, fmt.Errorf("dataplane: more than %d inbound ports in use", MaxPorts)
	}
	ctx, cancel := context.WithCancel(pc.s.Lifetime())
	pp := &port[S]{ready: make(chan struct{}), cancel: cancel}
	pc.m[p] = pp
	go pc.watch(ctx, p, pp)
	return pp, nil
}

// Has reports whether port has a policy yet (always, without a source).
func (pc *Ports[S]) Has(p uint32) bool {
	if pc.s.Policies == nil {
		return true
	}
	pc.mu.Lock()
	pp := pc.m[p]
	pc.mu.Unlock()
	return pp != nil && pp.cur.Load() != nil
}

// Get returns the current policy of port, starting its watch if needed
// and waiting up to the policy timeout for the first one.
func (pc *Ports[S]) Get(ctx context.Context, p uint32) (*S, error) {
	if pc.s.Policies == nil {
		return pc.s.Default, nil
	}
	pp, err := pc.start(p)
	if err != nil {
		return nil, err
	}
	if s := pp.cur.Load(); s != nil {
		return s, nil
	}
	timer := time.NewTimer(pc.s.Timeout)
	defer timer.Stop()
	select {
	case <-pp.ready:
		return pp.cur.Load(), nil
	case <-timer.C:
		return nil, fmt.Errorf("dataplane: no policy for port %d within %s", p, pc.s.Timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// watch keeps the latest policy of a port; when the stream breaks it keeps
// the last one and asks again with backoff. A source that knows nothing of
// the port yields the default policy. A policy Read refuses (a newer
// control plane's matchers, a malformed message) is not applied: the last
// good one stays, or, before any, the port gets what Refuse returns.
func (pc *Ports[S]) watch(ctx context.Context, p uint32, pp *port[S]) {
	backoff := 50 * time.Millisecond
	publish := func(s *S) {
		if pp.cur.Swap(s) == nil {
			close(pp.ready)
		}
	}
	for {
		ch, err := pc.s.Policies.Watch(ctx, p)
		if err == nil {
			for pol := range ch {
				if pol == nil {
					continue
				}
				s, rerr := pc.s.Read(pp.cur.Load(), pol)
				if rerr != nil {
					pc.s.Log.Warn("inbound policy refused", "port", p, "err", rerr)
					deny := pc.s.Refuse(pol)
					if pp.cur.Load() == nil {
						publish(deny)
					}
					continue
				}
				publish(s)
				backoff = 50 * time.Millisecond
			}
			if ctx.Err() != nil {
				return
			}
		} else if errors.Is(err, pc.s.NotFound) {
			// The source has no policy for this port: the default applies
			// until it has one.
			if pp.cur.Load() == nil {
				publish(pc.s.Default)
			}
			backoff = max(backoff, 5*time.Second)
			pc.s.Log.Debug("no policy for port, using the default", "port", p, "default", pc.s.DefaultName)
		} else {
			pc.s.Log.Warn("policy watch broken, keeping last policy", "port", p, "err", err, "retry_in", backoff)
		}
		select {
		case <-time.After(Jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// CloseAll ends every watch; Start and Get fail from then on.
func (pc *Ports[S]) CloseAll() {
	pc.mu.Lock()
	m := pc.m
	pc.m = nil
	pc.mu.Unlock()
	for _, pp := range m {
		pp.cancel()
	}
}
