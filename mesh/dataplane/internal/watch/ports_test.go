package watch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
)

var errNotFound = errors.New("not found")

// state is what the tests keep of a port's policy: the name of the
// policy it was read from, or of the default or the refusal.
type state struct {
	name string
	prev string // the state Read was given
}

// policySource counts the watches per port and feeds each the policies
// the test sends on its port's channel. A port in missing gets an error
// wrapping errNotFound.
type policySource struct {
	mu      sync.Mutex
	watches map[uint32]int
	feeds   map[uint32]chan *inbound.Server
	missing map[uint32]bool
	opened  chan uint32
}

func newPolicySource() *policySource {
	return &policySource{watches: map[uint32]int{}, feeds: map[uint32]chan *inbound.Server{}, missing: map[uint32]bool{},
		opened: make(chan uint32, 16)}
}

func (s *policySource) feed(port uint32) chan *inbound.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.feeds[port] == nil {
		s.feeds[port] = make(chan *inbound.Server)
	}
	return s.feeds[port]
}

func (s *policySource) Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error) {
	s.mu.Lock()
	s.watches[port]++
	missing := s.missing[port]
	s.mu.Unlock()
	s.opened <- port
	if missing {
		return nil, fmt.Errorf("%w: port %d", errNotFound, port)
	}
	in := s.feed(port)
	out := make(chan *inbound.Server)
	go func() {
		defer close(out)
		for {
			select {
			case pol := <-in:
				select {
				case out <- pol:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (s *policySource) count(port uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watches[port]
}

// server is a policy message named name; a name starting with "bad" is
// one the tests' Read refuses.
func server(name string) *inbound.Server {
	return &inbound.Server{Labels: map[string]string{"name": name}}
}

func newPorts(t *testing.T, src watch.Policies, mod func(*watch.PortSettings[state])) (*watch.Ports[state], *int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	refused := 0
	var mu sync.Mutex
	s := watch.PortSettings[state]{
		Policies:    src,
		Lifetime:    func() context.Context { return ctx },
		Timeout:     testutil.DefaultTimeout,
		Default:     &state{name: "default"},
		DefaultName: "all-unauthenticated",
		NotFound:    errNotFound,
		Read: func(prev *state, pol *inbound.Server) (*state, error) {
			name := pol.GetLabels()["name"]
			if len(name) >= 3 && name[:3] == "bad" {
				return nil, errors.New("unreadable")
			}
			st := &state{name: name}
			if prev != nil {
				st.prev = prev.name
			}
			return st, nil
		},
		Refuse: func(pol *inbound.Server) *state {
			mu.Lock()
			refused++
			mu.Unlock()
			return &state{name: "deny"}
		},
		Log: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&s)
	}
	pc := watch.NewPorts(s)
	t.Cleanup(func() {
		pc.CloseAll()
		cancel()
	})
	return pc, &refused
}

func TestThePolicyCacheSharesOneWatchPerPort(t *testing.T) {
	src := newPolicySource()
	pc, _ := newPorts(t, src, nil)
	ctx := testutil.Context(t, 0)

	const readers = 8
	results := make(chan *state, readers)
	errs := make(chan error, readers)
	for range readers {
		go func() {
			st, err := pc.Get(ctx, 8080)
			errs <- err
			results <- st
		}()
	}
	<-src.opened
	src.feed(8080) <- server("web")
	for range readers {
		require.NoError(t, <-errs)
		assert.Equal(t, "web", (<-results).name)
	}
	assert.Equal(t, 1, src.count(8080), "one watch for every reader of the port")
	assert.True(t, pc.Has(8080))
	assert.False(t, pc.Has(9090), "a port nobody asked for has no policy")

	// Another port has a watch of its own.
	require.NoError(t, pc.Start(9090))
	<-src.opened
	src.feed(9090) <- server("admin")
	testutil.Eventually(t, 0, func() bool { return pc.Has(9090) }, "port 9090's policy")
	st, err := pc.Get(ctx, 9090)
	require.NoError(t, err)
	assert.Equal(t, "admin", st.name)
	assert.Equal(t, 1, src.count(9090))
	assert.Equal(t, 1, src.count(8080))

	// A new policy replaces the old one, which Read was given.
	src.feed(8080) <- server("web-v2")
	testutil.Eventually(t, 0, func() bool { st, _ := pc.Get(ctx, 8080); return st.name == "web-v2" }, "the new policy")
	st, _ = pc.Get(ctx, 8080)
	assert.Equal(t, "web", st.prev)
}

func TestARefusedPolicyKeepsTheLastGoodOneOrDeniesBeforeAny(t *testing.T) {
	src := newPolicySource()
	pc, refused := newPorts(t, src, nil)
	ctx := testutil.Context(t, 0)

	require.NoError(t, pc.Start(80))
	<-src.opened
	src.feed(80) <- server("bad-first")
	testutil.Eventually(t, 0, func() bool { return pc.Has(80) }, "a state for port 80")
	st, err := pc.Get(ctx, 80)
	require.NoError(t, err)
	assert.Equal(t, "deny", st.name, "before any good policy, the port denies")

	src.feed(80) <- server("good")
	testutil.Eventually(t, 0, func() bool { st, _ := pc.Get(ctx, 80); return st.name == "good" }, "the good policy")
	src.feed(80) <- server("bad-later")
	src.feed(80) <- server("good-2") // once this is read, bad-later was too
	testutil.Eventually(t, 0, func() bool { st, _ := pc.Get(ctx, 80); return st.name == "good-2" }, "the next good policy")
	st, _ = pc.Get(ctx, 80)
	assert.Equal(t, "good", st.prev, "the refused policy was never applied")
	assert.Equal(t, 2, *refused, "each refusal is counted")
}

func TestAPortTheSourceDoesNotKnowGetsTheDefault(t *testing.T) {
	src := newPolicySource()
	src.missing[443] = true
	pc, _ := newPorts(t, src, nil)
	st, err := pc.Get(testutil.Context(t, 0), 443)
	require.NoError(t, err)
	assert.Equal(t, "default", st.name)
}

func TestGetFailsNamingThePortWhenNoPolicyComes(t *testing.T) {
	src := newPolicySource()
	pc, _ := newPorts(t, src, func(s *watch.PortSettings[state]) { s.Timeout = 20 * time.Millisecond })
	_, err := pc.Get(testutil.Context(t, 0), 8443)
	require.EqualError(t, err, "dataplane: no policy for port 8443 within 20ms")
	assert.False(t, pc.Has(8443))
}

func TestWithoutASourceEveryPortHasTheDefault(t *testing.T) {
	pc, _ := newPorts(t, nil, nil)
	st, err := pc.Get(testutil.Context(t, 0), 1)
	require.NoError(t, err)
	assert.Equal(t, "default", st.name)
	assert.True(t, pc.Has(2))
}

func TestThePolicyCacheBoundsItsWatchesAndStops(t *testing.T) {
	src := newPolicySource()
	src.opened = make(chan uint32, watch.MaxPorts+1)
	pc, _ := newPorts(t, src, nil)
	for port := range uint32(watch.MaxPorts) {
		require.NoError(t, pc.Start(port+1))
	}
	assert.EqualError(t, pc.Start(watch.MaxPorts+1), fmt.Sprintf("dataplane: more than %d inbound ports in use", watch.MaxPorts))
	require.NoError(t, pc.Start(1), "a watched port is still served")

	pc.CloseAll()
	assert.EqualError(t, pc.Start(1), "dataplane: proxy is stopping")
	_, err := pc.Get(testutil.Context(t, 0), 1)
	assert.EqualError(t, err, "dataplane: proxy is stopping")
}
