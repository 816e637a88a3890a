package meshstate

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
)

// guard bounds how long a test waits for an event that must come (a
// Watch call, a send taken, a call returning). It is a hang guard, not a
// measure: none of these events depends on a timer shorter than a few
// seconds.
const guard = 30 * time.Second

// source is a control-plane source the test drives by hand: each Watch
// call waits until the test takes it (next) and answers it with a stream
// (open) or an error (fail). K is the watch's key (a target or a port).
type source[K comparable, T any] struct {
	calls chan *watchCall[K, T]

	mu      sync.Mutex
	streams []*stream[T]
}

func newSource[K comparable, T any](t *testing.T) *source[K, T] {
	s := &source[K, T]{calls: make(chan *watchCall[K, T])}
	// A watch still reading a stream when the test ends stops when the
	// stream closes (its context is cancelled as well).
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, st := range s.streams {
			st.close()
		}
	})
	return s
}

// watchCall is one Watch call waiting for the test's answer.
type watchCall[K comparable, T any] struct {
	src   *source[K, T]
	key   K
	reply chan watchReply[T]
}

type watchReply[T any] struct {
	ch  <-chan T
	err error
}

// Watch is the source's method (OutboundPolicies, Profiles, Policies).
func (s *source[K, T]) Watch(ctx context.Context, key K) (<-chan T, error) {
	c := &watchCall[K, T]{src: s, key: key, reply: make(chan watchReply[T], 1)}
	select {
	case s.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-c.reply:
		return r.ch, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// next returns the next Watch call, failing the test when none comes.
func (s *source[K, T]) next(t *testing.T) *watchCall[K, T] {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(guard):
		t.Fatal("no Watch call came")
		return nil
	}
}

// open answers the call with a stream the test sends on.
func (c *watchCall[K, T]) open() *stream[T] {
	st := &stream[T]{ch: make(chan T)}
	c.src.mu.Lock()
	c.src.streams = append(c.src.streams, st)
	c.src.mu.Unlock()
	c.reply <- watchReply[T]{ch: st.ch}
	return st
}

// fail answers the call with err.
func (c *watchCall[K, T]) fail(err error) { c.reply <- watchReply[T]{err: err} }

// stream is the channel of one answered watch. It is unbuffered: a send
// returns once the watching goroutine took the value.
type stream[T any] struct {
	ch   chan T
	once sync.Once
}

func (st *stream[T]) send(t *testing.T, v T) {
	t.Helper()
	select {
	case st.ch <- v:
	case <-time.After(guard):
		t.Fatal("nobody took the value sent")
	}
}

// close breaks the stream (the watch ends as a broken one would).
func (st *stream[T]) close() { st.once.Do(func() { close(st.ch) }) }

// settle sends the values, then breaks the stream and waits for the
// watch's next call, which it returns: the watch ranges over the stream,
// so once it calls Watch again it has published every value sent.
func (c *watchCall[K, T]) settle(t *testing.T, vs ...T) *watchCall[K, T] {
	t.Helper()
	st := c.open()
	for _, v := range vs {
		st.send(t, v)
	}
	st.close()
	n := c.src.next(t)
	require.Equal(t, c.key, n.key, "the watch is asked again for the same key")
	return n
}

// resolver answers every target with one endpoint and keeps the watch
// open until its context ends; it counts the targets asked.
type resolver struct {
	mu    sync.Mutex
	asked []string
}

func (r *resolver) Resolve(ctx context.Context, target string) (<-chan []endpoint.Endpoint, error) {
	r.mu.Lock()
	r.asked = append(r.asked, target)
	r.mu.Unlock()
	ch := make(chan []endpoint.Endpoint, 1)
	ch <- []endpoint.Endpoint{{Addr: netip.MustParseAddrPort("127.0.0.1:1")}}
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

func (r *resolver) targets() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}

// harness is a State with real metrics, a lifetime context the test
// ends, and everything it started stopped when the test ends.
type harness struct {
	st  *State
	reg *prometheus.Registry
	m   *connmetrics.Set
	ctx context.Context
}

// newHarness builds a State from s, filling what every test needs: the
// lifetime, the metrics, NotFound, a logger and a clock.
func newHarness(t *testing.T, s Settings) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	reg := prometheus.NewRegistry()
	m, err := connmetrics.New(reg, func() (*tls.Certificate, error) { return nil, nil })
	require.NoError(t, err)
	s.Lifetime = func() context.Context { return ctx }
	s.Metrics = m
	s.NotFound = errNotFound
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	s.Now = time.Now
	if s.ResolveTimeout == 0 {
		s.ResolveTimeout = guard
	}
	if s.PolicyTimeout == 0 {
		s.PolicyTimeout = guard
	}
	h := &harness{st: New(s), reg: reg, m: m, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		h.st.Destinations().CloseAll()
		h.st.Ports().CloseAll()
	})
	return h
}

// fixed returns a destination of target with no discovery watch (one
// endpoint), released when the test ends.
func (h *harness) fixed(t *testing.T, target string) *Destination {
	d := h.st.Destinations().Fixed("test\x00"+target, target, []endpoint.Endpoint{{Addr: netip.MustParseAddrPort("127.0.0.1:1")}}, nil)
	require.NotNil(t, d)
	t.Cleanup(d.Release)
	return d
}

// serviceAsync calls Service in a goroutine; the channel gets its
// result.
func (h *harness) serviceAsync(d *Destination) <-chan *Service {
	ch := make(chan *Service, 1)
	go func() { ch <- h.st.Service(h.ctx, d) }()
	return ch
}

// await returns the Service a serviceAsync call returned.
func await(t *testing.T, ch <-chan *Service, what string) *Service {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(guard):
		t.Fatalf("Service did not return: %s", what)
		return nil
	}
}

// svcOf returns the Service made on d, nil before Service was called.
func svcOf(d *Destination) *Service {
	d.Ext.svcMu.Lock()
	defer d.Ext.svcMu.Unlock()
	return d.Ext.svc
}

// isReady reports whether the Service has its first policy and profile.
func isReady(s *Service) bool {
	select {
	case <-s.ready:
		return true
	default:
		return false
	}
}

// counter returns the value of the counter name with the given labels
// as the registry exposes it (0 when it has no such series).
func (h *harness) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// ended reports, within the guard, whether ctx ends.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(guard):
		return false
	}
}

// janitor runs the destinations' janitor (with the harness's DestIdle)
// until the returned function stops it.
func (h *harness) janitor() (stop func()) {
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.st.Destinations().Janitor(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// labelValues returns the values of label in the series of the family
// name the registry exposes, sorted.
func (h *harness) labelValues(t *testing.T, name, label string) []string {
	t.Helper()
	mfs, err := h.reg.Gather()
	require.NoError(t, err)
	var vs []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					vs = append(vs, lp.GetValue())
				}
			}
		}
	}
	slices.Sort(vs)
	return vs
}
