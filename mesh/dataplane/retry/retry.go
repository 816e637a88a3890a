package retry

import (
	"net/http"
	"sync"
	"time"
)

// BudgetOptions configure a Budget. Zero fields take Linkerd's defaults:
// ratio 0.2, 10 retries per second, a 10s window.
type BudgetOptions struct {
	Ratio        float64
	MinPerSecond uint32
	TTL          time.Duration
	Now          func() time.Time
}

// DefaultBudget returns Linkerd's default budget options.
func DefaultBudget() BudgetOptions {
	return BudgetOptions{Ratio: 0.2, MinPerSecond: 10, TTL: 10 * time.Second}
}

// Budget counts requests and retries in one-second slots over the window.
// It is safe for concurrent use.
type Budget struct {
	ratio float64
	min   float64
	now   func() time.Time

	mu      sync.Mutex
	slots   []slot
	current int64 // the second of the newest slot
}

type slot struct {
	sec       int64
	requests  float64
	withdrawn float64
}

// NewBudget returns a budget.
func NewBudget(o BudgetOptions) *Budget {
	d := DefaultBudget()
	if o.Ratio <= 0 {
		o.Ratio = d.Ratio
	}
	if o.Ratio > 1000 {
		o.Ratio = 1000
	}
	if o.TTL <= 0 {
		o.TTL = d.TTL
	}
	if o.TTL > time.Minute {
		o.TTL = time.Minute
	}
	if o.TTL < time.Second {
		o.TTL = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	n := int(o.TTL / time.Second)
	return &Budget{
		ratio: o.Ratio,
		min:   float64(o.MinPerSecond) * float64(n),
		now:   o.Now,
		slots: make([]slot, n),
	}
}

// slotFor returns the slot of the current second, clearing stale ones;
// b.mu is held.
func (b *Budget) slotFor() *slot {
	sec := b.now().Unix()
	s := &b.slots[int(uint64(sec)%uint64(len(b.slots)))]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	b.current = sec
	return s
}

// totals sums the live slots; b.mu is held.
func (b *Budget) totals() (requests, withdrawn float64) {
	oldest := b.current - int64(len(b.slots)) + 1
	for _, s := range b.slots {
		if s.sec >= oldest && s.sec <= b.current {
			requests += s.requests
			withdrawn += s.withdrawn
		}
	}
	return
}

// Deposit records one original request.
func (b *Budget) Deposit() {
	b.mu.Lock()
	b.slotFor().requests++
	b.mu.Unlock()
}

// Withdraw takes one retry from the budget, reporting false when the
// budget is spent.
func (b *Budget) Withdraw() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slotFor()
	req, wd := b.totals()
	if wd+1 > req*b.ratio+b.min {
		return false
	}
	s.withdrawn++
	return true
}

// Remaining reports how many retries the budget would allow now.
func (b *Budget) Remaining() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slotFor()
	req, wd := b.totals()
	left := req*b.ratio + b.min - wd
	if left < 0 {
		return 0
	}
	return int(left)
}

// MaxBufferedBody is the largest request body the proxy keeps in memory
// to replay it on a retry; requests with larger bodies are never retried.
const MaxBufferedBody = 64 << 10

// Idempotent reports whether a method may be repeated without changing
// the outcome (RFC 9110 section 9.2.2). Other methods are retried only
// where a route's configuration explicitly allows it.
func Idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}
