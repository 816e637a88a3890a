package ratelimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/mesh/dataplane/internal/ratelimit"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is read by the limiter and moved by the test only.
type fakeClock struct{ t time.Time }

func newClock() *fakeClock                   { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newLimiter(t *testing.T, rl *authz.RateLimit, c *fakeClock, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(rl, append([]ratelimit.Option{ratelimit.WithClock(c.now)}, opts...)...)
	require.NoError(t, err)
	require.NotNil(t, l)
	return l
}

const (
	client1 = "client-1.ns.serviceaccount.identity.weft.cluster.local"
	client2 = "client-2.ns.serviceaccount.identity.weft.cluster.local"
	client3 = "client-3.ns.serviceaccount.identity.weft.cluster.local"
	client4 = "client-4.ns.serviceaccount.identity.weft.cluster.local"
)

func allows(t *testing.T, l *ratelimit.Limiter, id string, n int, msg string) {
	t.Helper()
	for i := range n {
		require.True(t, l.Allow(id).Allowed, "%s: request %d of %d", msg, i+1, n)
	}
}

// The cases of Linkerd's proxy (linkerd2-proxy,
// linkerd/proxy/server-policy/src/local_rate_limit/tests.rs) under their
// names.
func TestLinkerdProxyCases(t *testing.T) {
	t.Run("from_proto", func(t *testing.T) {
		limit := func(n uint32) *inbound.HttpLocalRateLimit_Limit {
			return &inbound.HttpLocalRateLimit_Limit{RequestsPerSecond: n}
		}
		clients := func(ids ...string) *inbound.HttpLocalRateLimit_Override_ClientIdentities {
			c := &inbound.HttpLocalRateLimit_Override_ClientIdentities{}
			for _, id := range ids {
				c.Identities = append(c.Identities, &inbound.Identity{Name: id})
			}
			return c
		}
		pr := &inbound.HttpLocalRateLimit{
			Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "ratelimit-1"}},
			Total:    limit(100),
			Identity: limit(20),
			Overrides: []*inbound.HttpLocalRateLimit_Override{
				{Limit: limit(50), Clients: clients(client1, client2)},
				{Limit: limit(75), Clients: clients(client3, client4)},
			},
		}
		rl, err := authz.RateLimitFromProto(pr)
		require.NoError(t, err)
		assert.Equal(t, uint32(100), rl.Total)
		assert.Equal(t, uint32(20), rl.Identity)
		for id, want := range map[string]uint32{client1: 50, client2: 50, client3: 75, client4: 75, "other": 20} {
			_, got := rl.ClientLimit(id)
			assert.Equal(t, want, got, id)
		}

		// The limiter built from it: an override's identities share its
		// bucket; anyone else has the identity limit.
		c := newClock()
		l := newLimiter(t, rl, c)
		allows(t, l, client1, 50, "client-1 within the override")
		d := l.Allow(client2)
		assert.Equal(t, ratelimit.Decision{Scope: authz.ScopeOverride, RequestsPerSecond: 50, Reason: "override rate limit exceeded: 50rps"}, d,
			"client-2 shares client-1's override")
		allows(t, l, "other", 20, "another client within the identity limit")
		assert.Equal(t, authz.ScopeIdentity, l.Allow("other").Scope)
		allows(t, l, client3, 28, "client-3 until the total runs out (50+1+20+1+28 = 100)")
		d = l.Allow(client4)
		assert.Equal(t, ratelimit.Decision{Scope: authz.ScopeTotal, RequestsPerSecond: 100, Reason: "total rate limit exceeded: 100rps"}, d)
		assert.Equal(t, "total", d.MetricScope())
	})

	t.Run("check_rate_limits", func(t *testing.T) {
		c := newClock()
		l := newLimiter(t, &authz.RateLimit{Total: 35, Identity: 5, Overrides: []authz.RateLimitOverride{
			{RequestsPerSecond: 10, Identities: []string{client3}},
			{RequestsPerSecond: 15, Identities: []string{client4}},
		}}, c)
		for round := range 5 {
			msg := func(s string) string { return fmt.Sprintf("round %d: %s", round, s) }
			for range 5 {
				require.True(t, l.Allow(client1).Allowed, msg("client-1"))
				require.True(t, l.Allow(client3).Allowed, msg("client-3"))
				require.True(t, l.Allow(client4).Allowed, msg("client-4"))
			}
			d := l.Allow(client1)
			require.Equal(t, authz.ScopeIdentity, d.Scope, msg("client-1 reaches the identity limit"))
			require.Equal(t, "per-identity rate limit exceeded: 5rps", d.Reason)
			require.Equal(t, "identity", d.MetricScope())
			for range 5 {
				require.True(t, l.Allow(client3).Allowed, msg("client-3"))
				require.True(t, l.Allow(client4).Allowed, msg("client-4"))
			}
			d = l.Allow(client3)
			require.Equal(t, ratelimit.Decision{Scope: authz.ScopeOverride, RequestsPerSecond: 10, Reason: "override rate limit exceeded: 10rps"}, d, msg("client-3"))
			require.Equal(t, "identity", d.MetricScope(), "Linkerd labels override refusals as identity")
			allows(t, l, client4, 5, msg("client-4"))
			require.Equal(t, authz.ScopeOverride, l.Allow(client4).Scope, msg("client-4 reaches its override"))
			// 33 requests so far took total tokens, refused ones included.
			allows(t, l, client2, 2, msg("client-2"))
			require.Equal(t, authz.ScopeTotal, l.Allow(client2).Scope, msg("the total is reached"))
			c.advance(time.Second)
		}
	})
}

// admitted counts the requests the limiter admits for each identity when
// every identity sends one request each period, starting at 0, until
// (excluding) end.
func admitted(l *ratelimit.Limiter, c *fakeClock, period, end time.Duration, ids ...string) (map[string]int, time.Duration) {
	got := map[string]int{}
	var last time.Duration
	for at := time.Duration(0); at < end; at += period {
		for _, id := range ids {
			if l.Allow(id).Allowed {
				got[id]++
			}
		}
		last = at
		c.advance(period)
	}
	return got, last
}

// expected is what a bucket of rps lets through when overloaded from time
// 0 to last: the full bucket, then one request per 1/rps seconds.
func expected(rps uint32, last time.Duration) int {
	return int(rps) + int(last.Seconds()*float64(rps))
}

func TestRequestsAdmittedPerWindowFollowTheLimit(t *testing.T) {
	for _, tc := range []struct {
		rps    uint32
		period time.Duration // between requests
		first  int           // admitted in the first second (burst included)
		then   int           // admitted in each later second
	}{
		{rps: 10, period: 10 * time.Millisecond, first: 19, then: 10},
		{rps: 100, period: time.Millisecond, first: 199, then: 100},
		{rps: 1, period: 100 * time.Millisecond, first: 1, then: 1},
		{rps: 50, period: 5 * time.Millisecond, first: 99, then: 50},
		// Offered below the limit: nothing is refused.
		{rps: 10, period: 200 * time.Millisecond, first: 5, then: 5},
	} {
		t.Run(fmt.Sprintf("%drps_every_%s", tc.rps, tc.period), func(t *testing.T) {
			for _, kind := range []string{"total", "identity", "override", "anonymous"} {
				c := newClock()
				rl := &authz.RateLimit{}
				id := "client"
				switch kind {
				case "total":
					rl.Total = tc.rps
				case "identity":
					rl.Identity = tc.rps
				case "override":
					rl.Identity = 1
					rl.Overrides = []authz.RateLimitOverride{{RequestsPerSecond: tc.rps, Identities: []string{id}}}
				case "anonymous":
					rl.Identity = tc.rps
					id = ""
				}
				l := newLimiter(t, rl, c)
				var windows []int
				for range 5 {
					got, _ := admitted(l, c, tc.period, time.Second, id)
					windows = append(windows, got[id])
				}
				assert.Equal(t, []int{tc.first, tc.then, tc.then, tc.then, tc.then}, windows, kind)
			}
		})
	}
}

// Linkerd's end-to-end cases (policy-test/tests/e2e_http_local_ratelimit_policy.rs)
// send with fortio for 30 seconds and accept a range of refused
// percentages; here the same load runs against a fake clock, and the
// counts must also be exactly what the buckets allow.
func TestLinkerdEndToEndLoads(t *testing.T) {
	refused := func(admitted, sent int) int { return 100 * (sent - admitted) / sent }

	t.Run("ratelimit_total", func(t *testing.T) {
		c := newClock()
		l := newLimiter(t, &authz.RateLimit{Total: 70}, c)
		got, last := admitted(l, c, 10*time.Millisecond, 30*time.Second, client1) // 100 rps
		assert.InDelta(t, expected(70, last), got[client1], 1)
		assert.GreaterOrEqual(t, refused(got[client1], 3000), 25)
		assert.LessOrEqual(t, refused(got[client1], 3000), 35)
	})

	t.Run("ratelimit_identity_and_overrides", func(t *testing.T) {
		c := newClock()
		l := newLimiter(t, &authz.RateLimit{Total: 70, Identity: 5,
			Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 10, Identities: []string{client1}}}}, c)
		regular, unmeshed := client2, ""
		got, last := admitted(l, c, 50*time.Millisecond, 30*time.Second, regular, client1, unmeshed) // 20 rps each
		assert.InDelta(t, expected(5, last), got[regular], 1)
		assert.InDelta(t, expected(10, last), got[client1], 1)
		assert.InDelta(t, expected(5, last), got[unmeshed], 1)
		for id, want := range map[string][2]int{regular: {70, 80}, client1: {45, 55}, unmeshed: {70, 80}} {
			r := refused(got[id], 600)
			assert.GreaterOrEqual(t, r, want[0], "%q refused %d%%", id, r)
			assert.LessOrEqual(t, r, want[1], "%q refused %d%%", id, r)
		}
	})
}

func TestClientsWithoutIdentityShareOneBucketAndIdentitiesEachHaveTheirOwn(t *testing.T) {
	c := newClock()
	l := newLimiter(t, &authz.RateLimit{Identity: 3}, c)
	allows(t, l, "", 3, "unmeshed clients together")
	assert.False(t, l.Allow("").Allowed)
	allows(t, l, client1, 3, "client-1 has its own bucket")
	allows(t, l, client2, 3, "client-2 too")
	assert.False(t, l.Allow(client1).Allowed)
	assert.Equal(t, 2, l.Identities(), "the unmeshed bucket is not in the table")
}

func TestAHostileSetOfIdentitiesHoldsAtMostTheBoundAndCannotTakeBusyBuckets(t *testing.T) {
	const bound = 100
	c := newClock()
	l := newLimiter(t, &authz.RateLimit{Identity: 5}, c, ratelimit.WithMaxIdentities(bound))
	allows(t, l, client1, 1, "a client already tracked")

	hostile := 0
	for i := range 10000 {
		if l.Allow(fmt.Sprintf("attacker-%d.evil.serviceaccount.identity.weft.cluster.local", i)).Allowed {
			hostile++
		}
		require.LessOrEqual(t, l.Identities(), bound)
	}
	// 99 attackers got a bucket of their own; the other 9901 shared the
	// overflow bucket, which let 5 through.
	assert.Equal(t, bound-1+5, hostile)
	allows(t, l, client1, 4, "the tracked client keeps its own bucket")
	assert.False(t, l.Allow(client1).Allowed)

	// While every bucket is busy, a new identity shares the overflow.
	assert.False(t, l.Allow("newcomer").Allowed, "the overflow bucket is empty")

	// Once the buckets have refilled, the next new identity sweeps them
	// out and gets a bucket of its own.
	c.advance(time.Second)
	allows(t, l, "newcomer", 5, "a fresh bucket after the sweep")
	assert.Equal(t, 1, l.Identities(), "full buckets were dropped")
}

func TestASweepKeepsTheBucketsOfBusyIdentities(t *testing.T) {
	c := newClock()
	l := newLimiter(t, &authz.RateLimit{Identity: 2}, c, ratelimit.WithMaxIdentities(2))
	allows(t, l, client1, 2, "client-1 empties its bucket")
	allows(t, l, client2, 1, "client-2 uses one token")
	c.advance(500 * time.Millisecond) // client-2 has refilled, client-1 not
	allows(t, l, client3, 2, "client-3 takes client-2's place")
	// client-1's bucket was kept: half a second refilled one token of it,
	// where a new bucket would hold two.
	allows(t, l, client1, 1, "client-1's regained token")
	assert.False(t, l.Allow(client1).Allowed, "client-1's bucket was kept, not replaced by a full one")
	assert.Equal(t, 2, l.Identities())
}

func TestConcurrentRequestsNeverTakeMoreThanTheBucketHolds(t *testing.T) {
	c := newClock() // frozen: no token is added while they run
	l := newLimiter(t, &authz.RateLimit{Total: 1000, Identity: 50}, c, ratelimit.WithMaxIdentities(8))
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[string]int{}
			for i := range 400 {
				id := fmt.Sprintf("client-%d", (g+i)%4)
				if l.Allow(id).Allowed {
					local[id]++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for id, n := range local {
				counts[id] += n
			}
		}()
	}
	wg.Wait()
	for i := range 4 {
		assert.Equal(t, 50, counts[fmt.Sprintf("client-%d", i)], "client-%d gets exactly its burst", i)
	}

	total := newLimiter(t, &authz.RateLimit{Total: 1000}, c)
	var n sync.WaitGroup
	var sum [8]int
	for g := range 8 {
		n.Add(1)
		go func() {
			defer n.Done()
			for range 400 {
				if total.Allow("").Allowed {
					sum[g]++
				}
			}
		}()
	}
	n.Wait()
	all := 0
	for _, v := range sum {
		all += v
	}
	assert.Equal(t, 1000, all, "3200 concurrent requests, exactly the total's burst admitted")
}

func TestAllowDoesNotAllocateForKnownClients(t *testing.T) {
	rl := &authz.RateLimit{Total: 1 << 30, Identity: 1 << 30,
		Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 1 << 30, Identities: []string{client3}}}}
	l, err := ratelimit.New(rl)
	require.NoError(t, err)
	l.Allow(client1)
	for _, id := range []string{client1, client3, ""} {
		assert.Zero(t, testing.AllocsPerRun(1000, func() { l.Allow(id) }), "identity %q", id)
	}
	denied, err := ratelimit.New(&authz.RateLimit{Total: 1})
	require.NoError(t, err)
	denied.Allow("")
	assert.Zero(t, testing.AllocsPerRun(1000, func() { denied.Allow("") }), "a refusal does not allocate either")
	var none *ratelimit.Limiter
	assert.Zero(t, testing.AllocsPerRun(1000, func() { none.Allow(client1) }))
}

func TestNewRefusesLimitsAProxyCannotEnforceAndNilMeansNone(t *testing.T) {
	for name, rl := range map[string]*authz.RateLimit{
		"override without a limit":  {Overrides: []authz.RateLimitOverride{{Identities: []string{client1}}}},
		"override without clients":  {Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 1}}},
		"empty identity":            {Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 1, Identities: []string{""}}}},
		"identity in two overrides": {Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 1, Identities: []string{client1}}, {RequestsPerSecond: 2, Identities: []string{client1}}}},
	} {
		_, err := ratelimit.New(rl)
		assert.Error(t, err, name)
	}
	_, err := ratelimit.New(&authz.RateLimit{}, ratelimit.WithMaxIdentities(0))
	assert.ErrorContains(t, err, "max identities")
	_, err = ratelimit.New(&authz.RateLimit{}, ratelimit.WithClock(nil))
	assert.ErrorContains(t, err, "nil clock")

	l, err := ratelimit.New(nil)
	require.NoError(t, err)
	assert.Nil(t, l)
	assert.True(t, l.Allow("").Allowed, "no rate limit allows everything")
	assert.Zero(t, l.Identities())
}

func TestRatesAboveOneAGigahertzAreCappedNotBroken(t *testing.T) {
	c := newClock()
	l := newLimiter(t, &authz.RateLimit{Total: 4294967295}, c)
	allows(t, l, "", 100000, "a huge burst")
}
