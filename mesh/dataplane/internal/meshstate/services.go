package meshstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// Service is the outbound state of a destination: its router (from the
// outbound policy and the profile), retry budget and backends, each with
// a request balancer, and its compiled stream routes. It lives as long as
// its destination. The outbound HTTP side (internal/outbound) reads it as
// its Service; the L4 outbound path reads its policy and stream routes
// (streams.go, egress.go).
type Service struct {
	st     *State
	target string
	label  string
	dest   *Destination

	ready    chan struct{}
	polReady atomic.Bool
	proReady atomic.Bool

	router atomic.Pointer[route.Router]
	budget atomic.Pointer[retry.Budget]

	names atomic.Pointer[svcNames] // the route series' dst and the canonical name (routenames.go)
	// streams is the policy's stream routes as last compiled
	// (streams.go): one compilation per policy received, not
	// per connection.
	streams atomic.Pointer[compiledStreams]
	local   atomic.Pointer[reqmetrics.Series] // requests the proxy answers before any endpoint

	rebuildMu sync.Mutex // one rebuild at a time, so that the last one stored read the latest inputs

	mu       sync.Mutex
	pol      *outbound.OutboundPolicy
	prof     *pdst.DestinationProfile
	budgetOf retry.BudgetOptions
	backends map[string]*backend
	readyOne sync.Once
}

// backend is one backend of a route with its balancer (an
// outboundhttp.Backend).
type backend struct {
	svc     *Service
	spec    route.Backend
	dest    *Destination // nil for a forward backend
	bal     *balance.Balancer[endpoint.Endpoint]
	lastSet atomic.Pointer[watch.Set]
	mu      sync.Mutex
	series  reqmetrics.Cache[string, *reqmetrics.Series] // endpoint series by balancer key
}

// maxBackends bounds the backends a service keeps.
const maxBackends = 64

// Service returns the outbound state of d, creating it on first use and
// waiting up to the resolve timeout for its first policy and profile.
func (st *State) Service(ctx context.Context, d *Destination) *Service {
	d.Ext.svcMu.Lock()
	s := d.Ext.svc
	if s == nil {
		s = &Service{
			st: st, target: d.Target(), dest: d,
			label:    st.s.Metrics.HTTP.Targets.Admit(d.Target()),
			ready:    make(chan struct{}),
			backends: map[string]*backend{},
		}
		s.names.Store(&svcNames{dst: s.label})
		s.router.Store(route.Default(d.Target()))
		s.budgetOf = retry.DefaultBudget()
		s.budget.Store(retry.NewBudget(s.budgetOf))
		d.Ext.svc = s
		s.start(d.Context())
	}
	d.Ext.svcMu.Unlock()
	select {
	case <-s.ready:
	default:
		t := time.NewTimer(st.s.ResolveTimeout)
		defer t.Stop()
		select {
		case <-s.ready:
		case <-t.C:
			st.s.Log.Info("no outbound policy or profile in time, routing by default", "target", d.Target())
		case <-ctx.Done():
		}
	}
	return s
}

func (s *Service) start(ctx context.Context) {
	follow[*outbound.OutboundPolicy](ctx, s, "outbound policy", s.st.s.OutPolicies, &s.polReady, func(v *outbound.OutboundPolicy) { s.pol = v })
	follow[*pdst.DestinationProfile](ctx, s, "profile", s.st.s.Profiles, &s.proReady, func(v *pdst.DestinationProfile) { s.prof = v })
	s.checkReady()
	context.AfterFunc(ctx, s.releaseBackends)
}

// follow watches one of the service's inputs: each value is stored with
// set (under s.mu), marks the input ready and rebuilds the router.
// Without a source the input is ready at once, with nothing in it.
func follow[T any](ctx context.Context, s *Service, what string, src interface {
	Watch(context.Context, string) (<-chan T, error)
}, ready *atomic.Bool, set func(T)) {
	if src == nil {
		ready.Store(true)
		return
	}
	go watchSource(ctx, s.st, what, s.target, src.Watch, func(v T, _ bool) {
		s.mu.Lock()
		set(v)
		s.mu.Unlock()
		ready.Store(true)
		s.rebuild()
	})
}

func (s *Service) checkReady() {
	if s.polReady.Load() && s.proReady.Load() {
		s.readyOne.Do(func() { close(s.ready) })
	}
}

// rebuild compiles the router from the latest policy and profile. A
// policy the router cannot read is not applied: the last good router
// stays. The policy and profile watches rebuild concurrently: one at a
// time, or a rebuild that read the inputs before the other watch's update
// could store its router after the other's and lose that update.
func (s *Service) rebuild() {
	s.rebuildMu.Lock()
	defer s.rebuildMu.Unlock()
	s.mu.Lock()
	pol, prof := s.pol, s.prof
	s.mu.Unlock()
	r, err := route.Compile(pol, prof, s.target)
	if err != nil {
		s.st.s.Log.Warn("outbound policy refused, keeping the last one", "target", s.target, "err", err)
		s.checkReady()
		return
	}
	// The name comes with the router: a refused profile changes neither.
	s.setCanonical(canonicalName(prof, s.target))
	s.router.Store(r)
	s.mu.Lock()
	if !sameBudget(r.Budget, s.budgetOf) {
		s.budgetOf = r.Budget
		s.budget.Store(retry.NewBudget(r.Budget))
	}
	s.mu.Unlock()
	s.checkReady()
}

// watchSource follows a watch with the proxy's usual contract: the last
// value is kept when the stream breaks and it is asked again with
// backoff; an error wrapping Settings.NotFound publishes nothing found
// (nil).
func watchSource[T any](ctx context.Context, st *State, what, target string, open func(context.Context, string) (<-chan T, error), publish func(v T, found bool)) {
	backoff := 50 * time.Millisecond
	var zero T
	first := true
	for {
		ch, err := open(ctx, target)
		if err == nil {
			for v := range ch {
				publish(v, true)
				first = false
				backoff = 50 * time.Millisecond
			}
			if ctx.Err() != nil {
				return
			}
		} else if errors.Is(err, st.s.NotFound) {
			publish(zero, false)
			first = false
			backoff = max(backoff, 5*time.Second)
		} else {
			st.s.Log.Warn(what+" watch broken, keeping the last one", "target", target, "err", err, "retry_in", backoff)
			if first {
				// Nothing to keep: route by default rather than wait.
				publish(zero, false)
				first = false
			}
		}
		select {
		case <-time.After(watch.Jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func backendKey(b route.Backend, acc *balance.Accrual) string {
	k := "dst:" + b.Authority
	if b.Forward != nil {
		k = fmt.Sprintf("fwd:%s|%s|%d", b.Forward.Addr, b.Forward.Identity, b.Forward.OpaqueTransportPort)
	}
	if acc != nil {
		k += fmt.Sprintf("|acc:%+v", *acc)
	}
	if b.DefaultRTT != 0 || b.Decay != 0 {
		k += fmt.Sprintf("|ewma:%s/%s", b.DefaultRTT, b.Decay)
	}
	if b.Penalty != nil {
		k += fmt.Sprintf("|penalty:%s/%s", b.Penalty.Penalty, b.Penalty.MaxRetryAfter)
	}
	return k
}

// Names are the service's target, its label and its canonical name
// (routenames.go).
func (s *Service) Names() outboundhttp.Names {
	return outboundhttp.Names{Target: s.target, Label: s.label, Canonical: s.names.Load().canonical}
}

// Router selects a request's route.
func (s *Service) Router() *route.Router { return s.router.Load() }

// Budget is the service's retry budget.
func (s *Service) Budget() *retry.Budget { return s.budget.Load() }

// Backend returns the balancer of a route backend, resolving its
// authority the first time.
func (s *Service) Backend(ctx context.Context, spec route.Backend, acc *balance.Accrual) (outboundhttp.Backend, error) {
	key := backendKey(spec, acc)
	s.mu.Lock()
	if b := s.backends[key]; b != nil {
		s.mu.Unlock()
		return b, nil
	}
	if len(s.backends) >= maxBackends {
		s.mu.Unlock()
		return nil, fmt.Errorf("dataplane: %s has more than %d backends", s.target, maxBackends)
	}
	s.mu.Unlock()

	b := &backend{svc: s, spec: spec, bal: balance.New[endpoint.Endpoint](balance.Options{DefaultRTT: spec.DefaultRTT, Decay: spec.Decay, Accrual: acc, Penalty: spec.Penalty, Now: s.st.s.Now})}
	if spec.Forward != nil {
		b.bal.Update([]balance.Item[endpoint.Endpoint]{{Key: key, Weight: 1, Value: endpoint.Endpoint{
			Addr: spec.Forward.Addr, Identity: spec.Forward.Identity, OpaqueTransportPort: spec.Forward.OpaqueTransportPort,
		}}})
	} else if spec.Authority == s.target {
		b.dest = s.dest
	} else {
		d, err := s.st.dests.Get(ctx, spec.Authority)
		if err != nil {
			return nil, err
		}
		b.dest = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other := s.backends[key]; other != nil {
		if b.dest != nil && b.dest != s.dest {
			b.dest.Release()
		}
		return other, nil
	}
	s.backends[key] = b
	return b, nil
}

// releaseBackends drops the destinations the service's backends hold.
func (s *Service) releaseBackends() {
	s.mu.Lock()
	bs := s.backends
	s.backends = map[string]*backend{}
	s.mu.Unlock()
	for _, b := range bs {
		if b.dest != nil && b.dest != s.dest {
			b.dest.Release()
		}
	}
}

// refresh brings the balancer up to date with the destination's
// endpoints (a pointer comparison when nothing changed).
func (b *backend) refresh() {
	if b.dest == nil {
		return
	}
	set := b.dest.Set()
	if set == nil || b.lastSet.Load() == set {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastSet.Load() == set {
		return
	}
	items := make([]balance.Item[endpoint.Endpoint], 0, len(set.Endpoints()))
	for _, e := range set.Endpoints() {
		items = append(items, balance.Item[endpoint.Endpoint]{
			Key:    fmt.Sprintf("%s|%s|%d", e.Addr, e.Identity, e.OpaqueTransportPort),
			Weight: e.Weight,
			Value:  e.Endpoint,
		})
	}
	b.bal.Update(items)
	b.lastSet.Store(set)
}

// Balancer returns the backend's balancer, up to date.
func (b *backend) Balancer() *balance.Balancer[endpoint.Endpoint] {
	b.refresh()
	return b.bal
}

func sameBudget(a, b retry.BudgetOptions) bool {
	return a.Ratio == b.Ratio && a.MinPerSecond == b.MinPerSecond && a.TTL == b.TTL
}
