package testutil

import (
	"sync"
	"time"
)

// StepClock is a clock for code that measures durations: each reading
// is one step later than the one before, the first one step after the
// start. It is safe for concurrent use.
type StepClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// NewStepClock returns a clock starting at start that advances by step on
// every reading.
func NewStepClock(start time.Time, step time.Duration) *StepClock {
	return &StepClock{now: start, step: step}
}

// Now advances the clock by its step and returns the new time.
func (c *StepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}
