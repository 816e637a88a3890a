package watch_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
)

type got struct {
	d   *watch.Destination[ext]
	err error
}

// getAsync runs Get in a goroutine, so that the test can answer the
// Resolve it makes.
func getAsync(ctx context.Context, ds *watch.Destinations[ext], target string) <-chan got {
	ch := make(chan got, 1)
	go func() {
		d, err := ds.Get(ctx, target)
		ch <- got{d, err}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan got) got {
	t.Helper()
	select {
	case g := <-ch:
		return g
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("Get did not return")
		return got{}
	}
}

func TestABrokenWatchKeepsTheLastSetAndIsAskedAgain(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, nil)
	ctx := testutil.Context(t, 0)

	pending := getAsync(ctx, ds, "web:80")
	c := r.next(t)
	assert.Equal(t, "web:80", c.target)
	feed := c.answer()
	feed <- []endpoint.Endpoint{ep(1, 0), ep(2, 0)}
	g := wait(t, pending)
	require.NoError(t, g.err)
	d := g.d
	defer d.Release()
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, addrs(d.Set()))
	d.Set().Endpoints()[0].Active.Add(3) // three connections open to 10.0.0.1

	close(feed) // the control plane goes away
	again := r.next(t)
	assert.Equal(t, "web:80", again.target, "the broken watch is asked again")
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, addrs(d.Set()), "the last set stays while the watch is down")

	feed = again.answer()
	feed <- []endpoint.Endpoint{ep(1, 0), ep(3, 0)}
	testutil.Eventually(t, 0, func() bool { return len(d.Set().Endpoints()) == 2 && d.Set().Endpoints()[1].Addr == ep(3, 0).Addr },
		"the new watch's set")
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.3:8080"}, addrs(d.Set()))
	assert.Equal(t, int64(3), d.Set().Endpoints()[0].Active.Load(), "an endpoint still there keeps its open-connection count")
	assert.Zero(t, d.Set().Endpoints()[1].Active.Load())

	// Connections to the same target share the watch.
	d2 := get(t, ds, "web:80")
	defer d2.Release()
	assert.Same(t, d, d2)
}

func TestGetFailsNamingTheTargetWhenTheFirstAnswerIsLate(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, func(s *watch.DestinationSettings) { s.ResolveTimeout = 20 * time.Millisecond })
	ctx := testutil.Context(t, 0)

	pending := getAsync(ctx, ds, "slow:80")
	c := r.next(t)
	feed := c.answer() // the watch is open, no set comes
	g := wait(t, pending)
	require.EqualError(t, g.err, "dataplane: resolving slow:80: no answer within 20ms")
	assert.Nil(t, g.d)

	// The watch goes on: its answer serves the next connection.
	feed <- []endpoint.Endpoint{ep(1, 0)}
	testutil.Eventually(t, 0, func() bool {
		d, err := ds.Get(ctx, "slow:80")
		if err != nil {
			return false
		}
		d.Release()
		return true
	}, "the late answer")
}

func TestAFirstAnswerThatIsAnErrorIsReturnedAndForgotten(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, nil)
	ctx := testutil.Context(t, 0)
	notFound := errors.New("not found")

	pending := getAsync(ctx, ds, "nosuch:80")
	r.next(t).reply <- reply{err: notFound}
	g := wait(t, pending)
	require.ErrorIs(t, g.err, notFound)
	assert.EqualError(t, g.err, "dataplane: resolving nosuch:80: not found")

	// The target was forgotten: the next connection asks again.
	pending = getAsync(ctx, ds, "nosuch:80")
	c := r.next(t)
	assert.Equal(t, "nosuch:80", c.target)
	c.answer() <- []endpoint.Endpoint{}
	g = wait(t, pending)
	require.NoError(t, g.err)
	assert.Empty(t, g.d.Set().Endpoints(), "an empty set is kept as it is")
	g.d.Release()
}

func TestTheJanitorDropsAnUnusedTargetButNotOneInUse(t *testing.T) {
	r := newResolver()
	sweeps := make(chan struct{}, 1)
	ds := newCache(t, r, func(s *watch.DestinationSettings) {
		s.Idle = time.Millisecond
		s.Sweep = func() {
			select {
			case sweeps <- struct{}{}:
			default:
			}
		}
	})
	ctx := testutil.Context(t, 0)
	var dests []*watch.Destination[ext]
	for _, target := range []string{"used:80", "unused:80"} {
		pending := getAsync(ctx, ds, target)
		r.next(t).answer() <- []endpoint.Endpoint{ep(1, 0)}
		g := wait(t, pending)
		require.NoError(t, g.err)
		dests = append(dests, g.d)
	}
	used, unused := dests[0], dests[1]
	unused.Release()
	defer used.Release()

	jctx, stop := context.WithCancel(ctx)
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		ds.Janitor(jctx)
	}()
	defer func() {
		stop()
		<-janitorDone
	}()

	done(t, unused.Context(), "the unused destination's watch")
	// A whole round after the drop: the used one was looked at too.
	for range 2 {
		select {
		case <-sweeps:
		case <-time.After(testutil.DefaultTimeout):
			t.Fatal("the janitor does not sweep")
		}
	}
	assert.NoError(t, used.Context().Err(), "a destination in use keeps its watch")
	again := get(t, ds, "used:80")
	assert.Same(t, used, again, "the destination in use is still the cache's")
	again.Release()

	// The dropped target is watched anew on its next use.
	pending := getAsync(ctx, ds, "unused:80")
	c := r.next(t)
	assert.Equal(t, "unused:80", c.target)
	c.answer() <- []endpoint.Endpoint{ep(2, 0)}
	g := wait(t, pending)
	require.NoError(t, g.err)
	assert.NotSame(t, unused, g.d)
	g.d.Release()
}

func TestFixedDestinationsHaveTheirSetAndNoWatch(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, nil)
	inits := 0
	init := func(x *ext) { inits++; x.label = "egress" }
	d := ds.Fixed("egress\x00203.0.113.7:443", "203.0.113.7:443", []endpoint.Endpoint{ep(7, 0)}, init)
	require.NotNil(t, d)
	assert.Equal(t, "203.0.113.7:443", d.Target())
	assert.Equal(t, "egress", d.Ext.label)
	assert.Equal(t, []string{"10.0.0.7:8080"}, addrs(d.Set()))
	d2 := ds.Fixed("egress\x00203.0.113.7:443", "203.0.113.7:443", []endpoint.Endpoint{ep(8, 0)}, init)
	assert.Same(t, d, d2, "one destination per key")
	assert.Equal(t, 1, inits, "init runs once, for the new destination")
	d.Release()
	d2.Release()
	select {
	case c := <-r.calls:
		t.Fatalf("a fixed destination was resolved: %s", c.target)
	default:
	}

	ds.CloseAll()
	done(t, d.Context(), "the fixed destination")
	assert.Nil(t, ds.Fixed("egress\x00x:1", "x:1", nil, nil), "nothing after CloseAll")
	_, err := ds.Get(testutil.Context(t, 0), "web:80")
	assert.EqualError(t, err, "dataplane: proxy is stopping")
}

func TestPickNeverReturnsATriedEndpoint(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, nil)
	ctx := testutil.Context(t, 0)
	pending := getAsync(ctx, ds, "web:80")
	r.next(t).answer() <- []endpoint.Endpoint{ep(1, 0), ep(2, 0), ep(3, 0), ep(4, 0)}
	g := wait(t, pending)
	require.NoError(t, g.err)
	defer g.d.Release()
	set := g.d.Set()

	for round := range 200 {
		var tried []*watch.Balanced
		seen := map[*watch.Balanced]bool{}
		for range 4 {
			b := set.Pick(tried)
			require.NotNil(t, b, "round %d: an endpoint is left", round)
			require.False(t, seen[b], "round %d: %s was tried already", round, b.Addr)
			seen[b] = true
			tried = append(tried, b)
		}
		require.Nil(t, set.Pick(tried), "round %d: every endpoint was tried", round)
	}
}

func TestPickPrefersTheLessLoadedEndpoint(t *testing.T) {
	r := newResolver()
	ds := newCache(t, r, nil)
	ctx := testutil.Context(t, 0)
	pending := getAsync(ctx, ds, "web:80")
	r.next(t).answer() <- []endpoint.Endpoint{ep(1, 0), ep(2, 0), ep(3, 10)}
	g := wait(t, pending)
	require.NoError(t, g.err)
	defer g.d.Release()
	eps := g.d.Set().Endpoints()
	busy, idle, heavy := eps[0], eps[1], eps[2]
	busy.Active.Store(5)  // load 6/1
	heavy.Active.Store(4) // load 5/10: weight counts
	// idle: load 1/1

	// Of two free endpoints, power of two choices compares both.
	for round := range 100 {
		b := g.d.Set().Pick([]*watch.Balanced{heavy})
		require.Same(t, idle, b, "round %d: the idle endpoint, not the busy one", round)
		b = g.d.Set().Pick([]*watch.Balanced{busy})
		require.Same(t, heavy, b, "round %d: the weighted endpoint, whose load is lower", round)
	}
	// The busiest is never chosen while any two are free.
	for round := range 200 {
		assert.NotSame(t, busy, g.d.Set().Pick(nil), "round %d", round)
	}
}

func TestJitterStaysBetweenHalfAndAll(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 50 * time.Millisecond, 10 * time.Second} {
		for range 100 {
			j := watch.Jitter(d)
			require.GreaterOrEqual(t, j, d/2, fmt.Sprint(d))
			require.LessOrEqual(t, j, d, fmt.Sprint(d))
		}
	}
}
