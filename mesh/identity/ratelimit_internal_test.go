package identity

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheLimiterForgetsIdentitiesWhoseBucketRefilled: the limiter's memory
// is bounded by the identities that asked within one refill time.
func TestTheLimiterForgetsIdentitiesWhoseBucketRefilled(t *testing.T) {
	l := newLimiter(RateLimit{Burst: 10, PerSecond: 5}) // refills in 2 s
	start := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		n := Name{Namespace: "shop", ServiceAccount: fmt.Sprintf("sa-%d", i), Domain: DefaultDomain()}
		_, ok := l.take(n, start)
		require.True(t, ok)
	}
	assert.Equal(t, 100, l.size())

	busy := Name{Namespace: "shop", ServiceAccount: "busy", Domain: DefaultDomain()}
	for range 10 {
		_, ok := l.take(busy, start.Add(time.Second))
		require.True(t, ok)
	}
	// Two seconds after the first 100 asked, their buckets are full again
	// and forgotten; busy's (emptied a second later) is not.
	_, ok := l.take(busy, start.Add(2*time.Second))
	assert.True(t, ok, "5 tokens came back in a second")
	assert.Equal(t, 1, l.size())
}

func TestTheLimiterRefillsAtItsRateAndNoFurtherThanTheBurst(t *testing.T) {
	l := newLimiter(RateLimit{Burst: 3, PerSecond: 1})
	n := Name{Namespace: "shop", ServiceAccount: "web", Domain: DefaultDomain()}
	now := time.Unix(1_700_000_000, 0)
	for range 3 {
		_, ok := l.take(n, now)
		require.True(t, ok)
	}
	wait, ok := l.take(n, now)
	assert.False(t, ok)
	assert.Equal(t, time.Second, wait)
	wait, ok = l.take(n, now.Add(250*time.Millisecond))
	assert.False(t, ok)
	assert.Equal(t, 750*time.Millisecond, wait)
	// An hour later the bucket holds the burst, not 3,600 calls.
	now = now.Add(time.Hour)
	for range 3 {
		_, ok := l.take(n, now)
		require.True(t, ok)
	}
	_, ok = l.take(n, now)
	assert.False(t, ok)
}
