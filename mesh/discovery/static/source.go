package static

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/weftmesh/weft/apis/manifest"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/discovery"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// Sink receives each complete, checked set of objects. *discovery.Index
// implements it.
type Sink interface {
	Replace(objs []runtime.Object) error
}

// Option tunes New.
type Option func(*config)

type config struct {
	debounce time.Duration
	logger   *slog.Logger
}

// WithDebounce sets how long the files must be quiet before a reload
// (default 100ms), so that an editor's or a ConfigMap's burst of writes
// produces one reload.
func WithDebounce(d time.Duration) Option { return func(c *config) { c.debounce = d } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// Source keeps a Sink in step with manifests on disk.
type Source struct {
	cfg     config
	sink    Sink
	paths   []string
	watcher *fsnotify.Watcher
	updated chan struct{}

	mu       sync.Mutex
	err      error
	revision atomic.Uint64

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New loads paths into sink and starts watching them. It fails when the
// first load fails or a path cannot be watched. ctx bounds the start only;
// the source runs until Close.
func New(ctx context.Context, sink Sink, paths []string, opts ...Option) (*Source, error) {
	if sink == nil {
		return nil, errors.New("static: New needs a sink")
	}
	if len(paths) == 0 {
		return nil, errors.New("static: no manifest paths given")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	cfg := config{debounce: 100 * time.Millisecond, logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	abs := make([]string, len(paths))
	for i, p := range paths {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("static: path %q: %w", p, err)
		}
		abs[i] = a
	}
	s := &Source{cfg: cfg, sink: sink, paths: abs, updated: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("static: start watching: %w", err)
	}
	s.watcher = w
	for _, p := range abs {
		if err := s.watch(p); err != nil {
			_ = w.Close()
			return nil, err
		}
	}
	objs, err := Load(abs...)
	if err == nil {
		err = sink.Replace(objs)
	}
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	s.revision.Add(1)
	cfg.logger.Info("static: loaded manifests", "paths", strings.Join(abs, ","), "objects", len(objs))
	go s.run()
	return s, nil
}

// watch adds p to the watcher: a directory and its subdirectories, or the
// directory holding a file (so that replacing the file by a rename, as
// editors and ConfigMap volumes do, is seen).
func (s *Source) watch(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("static: manifest path: %w", err)
	}
	if !fi.IsDir() {
		if err := s.watcher.Add(filepath.Dir(p)); err != nil {
			return fmt.Errorf("static: watch %s: %w", filepath.Dir(p), err)
		}
		return nil
	}
	return filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("static: walk %s: %w", path, err)
		}
		if !d.IsDir() {
			return nil
		}
		if path != p && strings.HasPrefix(d.Name(), ".") && !strings.HasPrefix(d.Name(), "..") {
			return filepath.SkipDir
		}
		if err := s.watcher.Add(path); err != nil {
			return fmt.Errorf("static: watch %s: %w", path, err)
		}
		return nil
	})
}

// relevant reports whether an event may change what Load reads.
func (s *Source) relevant(ev fsnotify.Event) bool {
	for _, p := range s.paths {
		if ev.Name == p || strings.HasPrefix(ev.Name, p+string(filepath.Separator)) {
			return true
		}
		// A watched file's directory also reports its neighbours; the
		// "..data" link swap of a ConfigMap volume replaces every file.
		if filepath.Dir(ev.Name) == filepath.Dir(p) && strings.HasPrefix(filepath.Base(ev.Name), "..") {
			return true
		}
	}
	return false
}

func (s *Source) run() {
	defer close(s.done)
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-s.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case ev, ok := <-s.watcher.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && s.relevant(ev) {
					if err := s.watch(ev.Name); err != nil {
						s.cfg.logger.Warn("static: cannot watch new directory", "error", err)
					}
				}
			}
			if !s.relevant(ev) || ev.Op == fsnotify.Chmod {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(s.cfg.debounce)
			} else {
				timer.Reset(s.cfg.debounce)
			}
			fire = timer.C
		case err, ok := <-s.watcher.Errors:
			if !ok {
				return
			}
			s.cfg.logger.Warn("static: watch error; reloading", "error", err)
			s.reload()
		case <-fire:
			fire = nil
			s.reload()
		}
	}
}

// reload loads the paths again; on success the sink gets the new objects,
// on failure nothing changes and Err reports why.
func (s *Source) reload() {
	objs, err := Load(s.paths...)
	if err == nil {
		err = s.sink.Replace(objs)
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	if err != nil {
		s.cfg.logger.Error("static: reload failed; keeping the last good state", "error", err)
	} else {
		s.revision.Add(1)
		s.cfg.logger.Info("static: reloaded manifests", "objects", len(objs))
	}
	select {
	case s.updated <- struct{}{}:
	default:
	}
}

// Err returns why the last reload failed, or nil when it succeeded.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Revision counts successful loads, starting at 1 for the first. It and
// Err change after the sink has received the load's objects, so a
// subscriber of the sink may see the objects first.
func (s *Source) Revision() uint64 { return s.revision.Load() }

// Updated receives a signal after each reload attempt; signals coalesce.
func (s *Source) Updated() <-chan struct{} { return s.updated }

// Close stops watching and waits for the watcher goroutine. It is
// idempotent.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		_ = s.watcher.Close()
	})
	return nil
}

// Load decodes the manifests under paths and returns the objects
// discovery reads, checked: a namespaced object without a namespace is put
// in "default"; the same object defined twice, or a ServiceProfile that
// does not translate, is an error naming the file and document. Other
// kinds are skipped. On error no objects are returned.
func Load(paths ...string) ([]runtime.Object, error) {
	decoded, err := manifest.LoadPaths(paths...)
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	var errs []error
	var out []runtime.Object
	seen := map[string]manifest.Object{}
	for _, d := range decoded {
		if !discovery.Supported(d.Object) {
			continue
		}
		m, err := meta.Accessor(d.Object)
		if err != nil {
			errs = append(errs, fmt.Errorf("static: %s: %w", d, err))
			continue
		}
		kind := d.GroupVersionKind().Kind
		if kind != "Namespace" && m.GetNamespace() == "" {
			m.SetNamespace("default")
		}
		key := kind + " " + m.GetNamespace() + "/" + m.GetName()
		if first, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("static: %s: %s is already defined in %s document %d", d, key, first.Source, first.Document))
			continue
		}
		seen[key] = d
		if sp, ok := d.Object.(*spv1alpha2.ServiceProfile); ok {
			if _, err := discovery.TranslateServiceProfile(sp); err != nil {
				errs = append(errs, fmt.Errorf("static: %s document %d: %w", d.Source, d.Document, err))
				continue
			}
		}
		out = append(out, d.Object)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
