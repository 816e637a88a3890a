package static

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/mesh/policy"
)

// Source is a policy.Source reading Kubernetes manifests from files and
// directories, reloaded when they change.
type Source struct {
	paths []string
	cfg   config

	mu      sync.Mutex
	objs    *policy.Objects
	err     error
	print   [32]byte
	loads   int
	updated chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

type config struct {
	poll     time.Duration
	debounce time.Duration
	logger   *slog.Logger
	notify   bool
}

// Option changes how a Source watches its files.
type Option func(*config) error

// WithPollInterval sets how often files are checked for changes even
// without a filesystem notification (default 2s). Polling catches changes
// that inotify misses (network filesystems, ConfigMap symlink swaps).
func WithPollInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("static: poll interval must be positive, got %s", d)
		}
		c.poll = d
		return nil
	}
}

// WithDebounce sets how long to wait after a change before reloading, so
// that an editor's several writes cause one reload (default 100ms).
func WithDebounce(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("static: debounce must not be negative, got %s", d)
		}
		c.debounce = d
		return nil
	}
}

// WithoutNotify turns filesystem notifications off; only polling is used.
func WithoutNotify() Option {
	return func(c *config) error {
		c.notify = false
		return nil
	}
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l != nil {
			c.logger = l
		}
		return nil
	}
}

// New loads every manifest under paths (files, or directories walked for
// .yaml, .yml and .json files) and watches them until Close. It fails if
// the first load fails: there is no last good state to keep yet. ctx
// bounds the start only (New fails if it has already ended); the source
// lives until Close.
func New(ctx context.Context, paths []string, opts ...Option) (*Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	if len(paths) == 0 {
		return nil, errors.New("static: no paths")
	}
	cfg := config{poll: 2 * time.Second, debounce: 100 * time.Millisecond, logger: slog.New(slog.DiscardHandler), notify: true}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	s := &Source{paths: append([]string(nil), paths...), cfg: cfg, updated: make(chan struct{}, 1), done: make(chan struct{})}
	fp, err := fingerprint(s.paths)
	if err != nil {
		return nil, err
	}
	objs, err := load(s.paths)
	if err != nil {
		return nil, err
	}
	s.objs, s.print, s.loads = objs, fp, 1

	var w *fsnotify.Watcher
	if cfg.notify {
		if w, err = fsnotify.NewWatcher(); err != nil {
			cfg.logger.Warn("static: file notifications unavailable; polling only", "error", err)
			w = nil
		} else {
			s.watchDirs(w)
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(runCtx, w)
	return s, nil
}

func load(paths []string) (*policy.Objects, error) {
	ms, err := manifest.LoadPaths(paths...)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	objs, err := policy.ObjectsFromManifests(ms)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	return objs, nil
}

// watchDirs watches every directory under the paths, and the parent
// directory of each file path (editors replace files by renaming).
func (s *Source) watchDirs(w *fsnotify.Watcher) {
	seen := map[string]bool{}
	add := func(dir string) {
		if !seen[dir] {
			seen[dir] = true
			if err := w.Add(dir); err != nil {
				s.cfg.logger.Debug("static: cannot watch directory", "dir", dir, "error", err)
			}
		}
	}
	for _, p := range s.paths {
		st, err := os.Stat(p)
		if err != nil {
			add(filepath.Dir(p))
			continue
		}
		if !st.IsDir() {
			add(filepath.Dir(p))
			continue
		}
		_ = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				add(path)
			}
			return nil
		})
	}
}

// fingerprint summarizes the names, sizes and modification times of the
// files a load would read, so that unchanged files are not reloaded.
func fingerprint(paths []string) ([32]byte, error) {
	var lines []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			lines = append(lines, "missing "+p)
			continue
		}
		if !st.IsDir() {
			lines = append(lines, fmt.Sprintf("%s %d %d", p, st.Size(), st.ModTime().UnixNano()))
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				lines = append(lines, "error "+path)
				return nil
			}
			if path != p && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			ext := strings.ToLower(filepath.Ext(path))
			if ext != ".yaml" && ext != ".yml" && ext != ".json" {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				lines = append(lines, "error "+path)
				return nil
			}
			lines = append(lines, fmt.Sprintf("%s %d %d", path, info.Size(), info.ModTime().UnixNano()))
			return nil
		})
		if err != nil {
			return [32]byte{}, err
		}
	}
	sort.Strings(lines)
	return sha256.Sum256([]byte(strings.Join(lines, "\n"))), nil
}

func (s *Source) run(ctx context.Context, w *fsnotify.Watcher) {
	defer close(s.done)
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	tick := time.NewTicker(s.cfg.poll)
	defer tick.Stop()
	var debounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Create) {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					s.watchDirs(w)
				}
			}
			if debounce == nil {
				debounce = time.After(s.cfg.debounce)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			s.cfg.logger.Warn("static: file notification error", "error", err)
		case <-tick.C:
			s.check()
		case <-debounce:
			debounce = nil
			s.check()
		}
	}
}

// check reloads when the files changed.
func (s *Source) check() {
	fp, err := fingerprint(s.paths)
	if err != nil {
		s.setErr(err)
		return
	}
	s.mu.Lock()
	same := fp == s.print
	s.mu.Unlock()
	if same {
		return
	}
	objs, err := load(s.paths)
	s.mu.Lock()
	s.print = fp
	if err != nil {
		s.err = err
		s.mu.Unlock()
		s.cfg.logger.Error("static: reload failed; keeping the last good objects", "error", err)
		s.signal()
		return
	}
	s.objs, s.err = objs, nil
	s.loads++
	s.mu.Unlock()
	s.cfg.logger.Info("static: reloaded", "objects", objs.Len())
	s.signal()
}

func (s *Source) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *Source) signal() {
	select {
	case s.updated <- struct{}{}:
	default:
	}
}

// Objects returns the last good snapshot.
func (s *Source) Objects() *policy.Objects {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs
}

// Updated receives after a reload, good or failed.
func (s *Source) Updated() <-chan struct{} { return s.updated }

// Err returns the error of the last reload, or nil when the files were
// read successfully; a failed reload keeps the previous objects.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Loads returns how many times the files were read successfully.
func (s *Source) Loads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads
}

// Close stops watching and waits for the watcher to finish. It is safe
// to call more than once.
func (s *Source) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
	return nil
}

var _ policy.Source = (*Source)(nil)
