// Package filewatch notices when the contents of a few files change. It
// watches the files' directories with fsnotify (which sees the symlink
// swaps Kubernetes uses for mounted Secrets and ConfigMaps) and also polls,
// so a missed event only delays a reload. Callbacks fire only when the
// bytes differ from the last ones seen.
package filewatch

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultInterval is the polling period when none is given.
const DefaultInterval = 2 * time.Second

// settle is how long to wait after an event before reading, so that a
// writer that truncates then writes is read once, complete.
const settle = 50 * time.Millisecond

// Watcher follows a set of files.
type Watcher struct {
	paths    []string
	interval time.Duration
	last     [32]byte
	checks   atomic.Uint64
}

// New records the current contents of paths. Create the Watcher before
// loading the files the first time: a change that lands between the two is
// then seen as a change instead of being missed.
func New(interval time.Duration, paths ...string) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	w := &Watcher{paths: paths, interval: interval}
	w.last = w.fingerprint()
	return w
}

// fingerprint hashes the contents of every path; a missing or unreadable
// file contributes its error text instead.
func (w *Watcher) fingerprint() [32]byte {
	h := sha256.New()
	for _, p := range w.paths {
		b, err := os.ReadFile(p)
		if err != nil {
			h.Write([]byte("error:" + err.Error()))
		} else {
			h.Write(b)
		}
		h.Write([]byte{0})
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// Checks counts the times Run has compared the files with what it saw
// last (after onChange, when it was called): the event a test waits for to
// know that a change was, or was not, noticed.
func (w *Watcher) Checks() uint64 { return w.checks.Load() }

// Run calls onChange each time the files' contents change, until ctx is
// cancelled. It returns nil on cancellation. When fsnotify cannot be used,
// it falls back to polling alone.
func (w *Watcher) Run(ctx context.Context, onChange func()) error {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fw, err := fsnotify.NewWatcher(); err == nil {
		defer fw.Close()
		dirs := map[string]bool{}
		for _, p := range w.paths {
			dirs[filepath.Dir(p)] = true
		}
		for d := range dirs {
			_ = fw.Add(d)
		}
		events, errs = fw.Events, fw.Errors
	}
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	var settleC <-chan time.Time
	check := func() {
		if fp := w.fingerprint(); fp != w.last {
			w.last = fp
			onChange()
		}
		w.checks.Add(1)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if settleC == nil {
				settleC = time.After(settle)
			}
		case _, ok := <-errs:
			if !ok {
				errs = nil
			}
		case <-settleC:
			settleC = nil
			check()
		case <-tick.C:
			check()
		}
	}
}
