package balance_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
)

// clock is a manual clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_700_000_000, 0)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func items(keys ...string) []balance.Item[string] {
	var out []balance.Item[string]
	for _, k := range keys {
		out = append(out, balance.Item[string]{Key: k, Weight: 1, Value: k})
	}
	return out
}

func TestPickFailsFastWithoutEndpoints(t *testing.T) {
	b := balance.New[string](balance.Options{})
	_, err := b.Pick()
	assert.ErrorIs(t, err, balance.ErrNoEndpoints)
}

func TestSlowEndpointsGetLessTraffic(t *testing.T) {
	c := newClock()
	r := rand.New(rand.NewPCG(1, 2))
	b := balance.New[string](balance.Options{Now: c.now, IntN: r.IntN, DefaultRTT: 10 * time.Millisecond})
	b.Update(items("fast", "slow", "medium"))
	latency := map[string]time.Duration{"fast": time.Millisecond, "medium": 10 * time.Millisecond, "slow": 200 * time.Millisecond}
	count := map[string]int{}
	for i := 0; i < 3000; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		count[h.Value()]++
		c.advance(latency[h.Value()])
		h.Done(true)
	}
	assert.Greater(t, count["fast"], count["medium"])
	assert.Greater(t, count["medium"], count["slow"])
	assert.Less(t, count["slow"], 300, "the slow endpoint gets a small share: %v", count)
}

func TestPendingRequestsRaiseLoad(t *testing.T) {
	c := newClock()
	b := balance.New[string](balance.Options{Now: c.now})
	b.Update(items("a", "b"))
	var held []*balance.Handle[string]
	for i := 0; i < 10; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		held = append(held, h)
	}
	n := map[string]int{}
	for _, h := range held {
		n[h.Value()]++
	}
	assert.Equal(t, 5, n["a"], "with equal latency, outstanding requests are spread: %v", n)
	assert.Equal(t, 5, n["b"])
}

func TestConsecutiveFailuresEjectWithGrowingBackoffAndOneProbe(t *testing.T) {
	// T38: 7 failures in a row eject; the penalty starts at 1s and grows;
	// on probation exactly one request probes.
	c := newClock()
	acc := balance.Accrual{MaxFailures: 7, MinBackoff: time.Second, MaxBackoff: time.Minute}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("bad", "good"))
	fail := func() {
		// Fail requests to "bad" until it is ejected.
		for i := 0; i < 100; i++ {
			h, err := b.Pick()
			require.NoError(t, err)
			h.Done(h.Value() != "bad")
			if snapshot(b, "bad").Ejected {
				return
			}
		}
		t.Fatal("bad was never ejected")
	}
	fail()
	assert.Equal(t, 1, b.Available())
	for i := 0; i < 20; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		assert.Equal(t, "good", h.Value(), "an ejected endpoint gets nothing")
		h.Done(true)
	}
	c.advance(time.Second + time.Millisecond)
	assert.Equal(t, 2, b.Available(), "after the penalty the endpoint is on probation")
	var probe *balance.Handle[string]
	for i := 0; i < 50 && probe == nil; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		if h.Value() == "bad" {
			probe = h
		} else {
			h.Done(true)
		}
	}
	require.NotNil(t, probe, "one request probes")
	for i := 0; i < 20; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		assert.Equal(t, "good", h.Value(), "only one probe at a time")
		h.Done(true)
	}
	probe.Done(false)
	s := snapshot(b, "bad")
	require.True(t, s.Ejected, "a failed probe ejects again")
	assert.Equal(t, 2*time.Second, s.Until.Sub(c.now()), "for twice as long")

	c.advance(2*time.Second + time.Millisecond)
	for {
		h, err := b.Pick()
		require.NoError(t, err)
		if h.Value() == "bad" {
			h.Done(true)
			break
		}
		h.Done(true)
	}
	assert.False(t, snapshot(b, "bad").Ejected)
	// A successful probe resets the backoff: the next ejection is 1s again.
	fail()
	assert.Equal(t, time.Second, snapshot(b, "bad").Until.Sub(c.now()))
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	c := newClock()
	acc := balance.Accrual{MaxFailures: 1, MinBackoff: time.Second, MaxBackoff: 4 * time.Second, Jitter: 0.5}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc, IntN: func(n int) int { return n - 1 }})
	b.Update(items("only"))
	var last time.Duration
	for i := 0; i < 6; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		h.Done(false)
		s := snapshot(b, "only")
		require.True(t, s.Ejected)
		last = s.Until.Sub(c.now())
		_, err = b.Pick()
		assert.ErrorIs(t, err, balance.ErrUnavailable, "all endpoints out: fail fast")
		c.advance(last + time.Millisecond)
	}
	assert.LessOrEqual(t, last, 6*time.Second, "max backoff plus at most half of it")
	assert.Greater(t, last, 4*time.Second, "jitter adds to the capped backoff")
}

func TestUpdateKeepsStatisticsOfEndpointsThatStay(t *testing.T) {
	c := newClock()
	acc := balance.Accrual{MaxFailures: 1, MinBackoff: time.Minute}
	b := balance.New[string](balance.Options{Now: c.now, Accrual: &acc})
	b.Update(items("a", "b"))
	for !snapshot(b, "a").Ejected {
		h, err := b.Pick()
		require.NoError(t, err)
		h.Done(h.Value() != "a")
	}
	b.Update(items("a", "c"))
	assert.True(t, snapshot(b, "a").Ejected, "an endpoint that stays keeps its state")
	assert.Equal(t, 2, b.Len())
	b.Update(nil)
	_, err := b.Pick()
	assert.ErrorIs(t, err, balance.ErrNoEndpoints)
}

func TestPickExceptAvoidsEarlierAttempts(t *testing.T) {
	b := balance.New[string](balance.Options{})
	b.Update(items("a", "b", "c"))
	first, err := b.Pick()
	require.NoError(t, err)
	tried := []*balance.Handle[string]{first}
	for i := 0; i < 2; i++ {
		h, err := b.PickExcept(tried)
		require.NoError(t, err)
		for _, o := range tried {
			assert.NotEqual(t, o.Key(), h.Key())
		}
		tried = append(tried, h)
	}
	h, err := b.PickExcept(tried)
	require.NoError(t, err, "with everything tried, any endpoint is better than none")
	assert.NotEmpty(t, h.Key())
}

func TestWeightsBiasTheChoice(t *testing.T) {
	b := balance.New[string](balance.Options{})
	b.Update([]balance.Item[string]{{Key: "heavy", Weight: 10, Value: "heavy"}, {Key: "light", Weight: 1, Value: "light"}})
	n := map[string]int{}
	var held []*balance.Handle[string]
	for i := 0; i < 110; i++ {
		h, err := b.Pick()
		require.NoError(t, err)
		n[h.Value()]++
		held = append(held, h)
	}
	assert.Greater(t, n["heavy"], 5*n["light"], "%v", n)
	for _, h := range held {
		h.Done(true)
	}
}

func TestConcurrentUseIsSafe(t *testing.T) {
	acc := balance.DefaultAccrual()
	b := balance.New[string](balance.Options{Accrual: &acc})
	b.Update(items("a", "b", "c", "d"))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				if h, err := b.Pick(); err == nil {
					h.Done(i%13 != 0)
				}
				if i%500 == 0 {
					b.Update(items("a", "b", "c", fmt.Sprint("e", i)))
				}
			}
		}()
	}
	wg.Wait()
}

func snapshot(b *balance.Balancer[string], key string) balance.Snapshot {
	for _, s := range b.Snapshot() {
		if s.Key == key {
			return s
		}
	}
	return balance.Snapshot{}
}

func ExampleBalancer() {
	acc := balance.DefaultAccrual()
	b := balance.New[string](balance.Options{Accrual: &acc})
	b.Update([]balance.Item[string]{{Key: "10.0.0.1:8080", Weight: 1, Value: "10.0.0.1:8080"}})
	h, err := b.Pick()
	if err != nil {
		fmt.Println("503:", err)
		return
	}
	fmt.Println("send to", h.Value())
	h.Done(true)
	// Output: send to 10.0.0.1:8080
}
