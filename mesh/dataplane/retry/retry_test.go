package retry_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/retry"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBudgetAllowsRatioPlusMinimumPerSecond(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	b := retry.NewBudget(retry.BudgetOptions{Ratio: 0.2, MinPerSecond: 10, TTL: 10 * time.Second, Now: c.now})
	// With no traffic, only the floor: 10/s over 10s.
	allowed := 0
	for i := 0; i < 1000; i++ {
		if b.Withdraw() {
			allowed++
		}
	}
	assert.Equal(t, 100, allowed)

	// 1000 requests add 200 more.
	c.t = c.t.Add(11 * time.Second)
	for i := 0; i < 1000; i++ {
		b.Deposit()
	}
	allowed = 0
	for i := 0; i < 10000; i++ {
		if b.Withdraw() {
			allowed++
		}
	}
	assert.Equal(t, 300, allowed)
	assert.Equal(t, 0, b.Remaining())
}

func TestBudgetWindowSlides(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	b := retry.NewBudget(retry.BudgetOptions{Ratio: 0.5, MinPerSecond: 1, TTL: 2 * time.Second, Now: c.now})
	for i := 0; i < 100; i++ {
		b.Deposit()
	}
	assert.Equal(t, 52, b.Remaining())
	for b.Withdraw() {
	}
	c.t = c.t.Add(3 * time.Second)
	assert.Equal(t, 2, b.Remaining(), "old requests and retries leave the window")
}

func TestBudgetUnderFullOutageCapsExtraLoad(t *testing.T) {
	// T37: every request fails and is retried while the budget lasts; the
	// extra load stays within ratio (plus the floor).
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	b := retry.NewBudget(retry.BudgetOptions{Ratio: 0.2, MinPerSecond: 10, TTL: 10 * time.Second, Now: c.now})
	requests, retries := 0, 0
	for sec := 0; sec < 30; sec++ {
		for i := 0; i < 1000; i++ {
			requests++
			b.Deposit()
			for attempt := 0; attempt < 3; attempt++ {
				if !b.Withdraw() {
					break
				}
				retries++
			}
		}
		c.t = c.t.Add(time.Second)
	}
	ratio := float64(retries) / float64(requests)
	assert.InDelta(t, 0.2, ratio, 0.02, "retries per request under a full outage: %d/%d", retries, requests)
}

func TestOnlyIdempotentMethodsAreRetriedByDefault(t *testing.T) {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions, http.MethodTrace} {
		assert.True(t, retry.Idempotent(m), m)
	}
	for _, m := range []string{http.MethodPost, http.MethodPatch, http.MethodConnect, "PURGE"} {
		assert.False(t, retry.Idempotent(m), m)
	}
}

func ExampleBudget() {
	b := retry.NewBudget(retry.DefaultBudget())
	b.Deposit()               // a request
	fmt.Println(b.Withdraw()) // its retry fits the budget
	// Output: true
}
