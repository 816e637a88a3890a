package identity

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/weftmesh/weft/mesh/identity/internal/filewatch"
)

// BundleFile is a BundleSource that follows a PEM file on disk: when the
// file changes, the new bundle replaces the old one without a restart. A
// change that does not parse is logged and ignored; the last good bundle
// stays in use.
type BundleFile struct {
	path    string
	cfg     config
	mu      sync.RWMutex
	bundle  *Bundle
	updated chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once
}

// NewBundleFile loads the bundle at path and starts following it. It fails
// when the file cannot be read or parsed. ctx bounds the start only (New
// fails if it has already ended); the file is followed until Close.
// Options: WithLogger, WithPollInterval.
func NewBundleFile(ctx context.Context, path string, opts ...Option) (*BundleFile, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("identity: trust bundle %s: %w", path, err)
	}
	cfg := newConfig(opts)
	w := filewatch.New(cfg.interval, path)
	b, err := readBundle(path)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f := &BundleFile{
		path: path, cfg: cfg, bundle: b,
		updated: make(chan struct{}, 1),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		defer close(f.done)
		_ = w.Run(runCtx, f.reload)
	}()
	return f, nil
}

func readBundle(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity: trust bundle: %w", err)
	}
	b, err := ParseBundle(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return b, nil
}

func (f *BundleFile) reload() {
	b, err := readBundle(f.path)
	if err != nil {
		f.cfg.logger.Error("trust bundle reload failed; keeping the previous bundle", "file", f.path, "error", err)
		return
	}
	f.mu.Lock()
	f.bundle = b
	f.mu.Unlock()
	f.cfg.logger.Info("trust bundle reloaded", "file", f.path, "roots", len(b.roots))
	select {
	case f.updated <- struct{}{}:
	default:
	}
}

// Bundle returns the current bundle.
func (f *BundleFile) Bundle() *Bundle {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.bundle
}

// Updated receives a value after each successful reload. Notifications are
// coalesced: a slow reader sees one for several reloads.
func (f *BundleFile) Updated() <-chan struct{} { return f.updated }

// Close stops following the file. It is safe to call more than once.
func (f *BundleFile) Close() error {
	f.once.Do(func() {
		f.cancel()
		<-f.done
	})
	return nil
}
