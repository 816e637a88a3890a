package check

import (
	"context"
	"time"
)

// Source runs checks: a *Checker, or anything that reports like one (a
// Checker bounded by a timeout per run, a fake in tests).
type Source interface {
	Check(ctx context.Context, scope Scope) Report
}

// SourceFunc lets a function be a Source.
type SourceFunc func(ctx context.Context, scope Scope) Report

// Check calls f.
func (f SourceFunc) Check(ctx context.Context, scope Scope) Report { return f(ctx, scope) }

// DefaultWait is how long `weft check` waits for a control plane that is
// not ready yet, as `linkerd check --wait` does (300s).
const DefaultWait = 5 * time.Minute

// DefaultPollInterval is how long Wait pauses between runs (Linkerd's
// checks retry every 5s).
const DefaultPollInterval = 5 * time.Second

// WaitOption tunes Wait.
type WaitOption func(*waitConfig)

type waitConfig struct {
	interval time.Duration
	now      func() time.Time
	after    func(time.Duration) <-chan time.Time
	onWait   func(Report, time.Duration)
}

// WithPollInterval sets the pause between runs (default
// DefaultPollInterval).
func WithPollInterval(d time.Duration) WaitOption { return func(c *waitConfig) { c.interval = d } }

// WithWaitClock sets the clock the deadline is measured with and the
// timer Wait pauses on (default time.Now and time.After).
func WithWaitClock(now func() time.Time, after func(time.Duration) <-chan time.Time) WaitOption {
	return func(c *waitConfig) { c.now, c.after = now, after }
}

// OnWait calls f before each pause with the report whose failures are
// waited for and the time left (default: nothing).
func OnWait(f func(rep Report, left time.Duration)) WaitOption {
	return func(c *waitConfig) { c.onWait = f }
}

// Wait runs src's checks of scope until they pass, or fail for a reason
// waiting cannot cure (a failure that is not NotReady), or until d has
// passed since the first run, and returns the last report. With d of 0 it
// runs the checks once. ctx bounds the whole wait: when it ends, the last
// report is returned.
func Wait(ctx context.Context, src Source, scope Scope, d time.Duration, opts ...WaitOption) Report {
	cfg := waitConfig{interval: DefaultPollInterval, now: time.Now, after: time.After, onWait: func(Report, time.Duration) {}}
	for _, o := range opts {
		o(&cfg)
	}
	deadline := cfg.now().Add(d)
	for {
		rep := src.Check(ctx, scope)
		if rep.Success || !rep.OnlyNotReady() {
			return rep
		}
		left := deadline.Sub(cfg.now())
		if left <= 0 || ctx.Err() != nil {
			return rep
		}
		pause := min(cfg.interval, left)
		cfg.onWait(rep, left)
		select {
		case <-ctx.Done():
			return rep
		case <-cfg.after(pause):
		}
	}
}
