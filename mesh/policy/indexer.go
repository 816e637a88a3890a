package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Indexer keeps an Index up to date with a Source: it builds the first
// index when created and rebuilds it after every change while Run runs.
// The Inbound and Outbound servers read from it.
type Indexer struct {
	src Source
	cfg *Config

	mu  sync.RWMutex // guards cur
	cur *Index

	pubMu     sync.Mutex // serializes publishing to listeners
	listeners map[int]func(*Index)
	nextID    int
	updated   chan struct{}
}

// NewIndexer builds the first index from src. ctx bounds the start only
// (NewIndexer fails if it has already ended); the index follows src for
// the context given to Run.
func NewIndexer(ctx context.Context, src Source, opts ...Option) (*Indexer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if src == nil {
		return nil, errors.New("policy: nil source")
	}
	cfg, err := NewConfig(opts...)
	if err != nil {
		return nil, err
	}
	x := &Indexer{src: src, cfg: cfg, updated: make(chan struct{}, 1), listeners: map[int]func(*Index){}}
	x.cur = x.build()
	return x, nil
}

func (x *Indexer) build() *Index {
	start := x.cfg.Clock()
	ix := Build(x.src.Objects(), x.cfg)
	d := x.cfg.Clock().Sub(start)
	x.cfg.Metrics.RebuildSeconds.Observe(d.Seconds())
	x.cfg.Logger.Debug("policy index built", "objects", ix.objs.Len(), "problems", len(ix.problems), "duration", d)
	// Log only problems that are new since the last build.
	seen := map[string]bool{}
	if prev := x.Index(); prev != nil {
		for _, p := range prev.problems {
			seen[p.String()] = true
		}
	}
	for _, p := range ix.problems {
		if !seen[p.String()] {
			x.cfg.Logger.Info("policy problem", "severity", p.Severity.String(), "object", p.Object.String(), "field", p.Field, "message", p.Message)
		}
	}
	return ix
}

// Index returns the current index.
func (x *Indexer) Index() *Index {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.cur
}

// Updated receives after each rebuild (coalesced).
func (x *Indexer) Updated() <-chan struct{} { return x.updated }

// listen calls f with the current index now and with every new one.
func (x *Indexer) listen(f func(*Index)) { x.Subscribe(f) }

// Subscribe calls f with the current index now and with every new one
// until the returned function is called. f runs while the index is being
// published and must not block: hand the index on, or signal a channel.
// Unlike Updated, every subscriber sees every index.
func (x *Indexer) Subscribe(f func(*Index)) (cancel func()) {
	x.pubMu.Lock()
	defer x.pubMu.Unlock()
	id := x.nextID
	x.nextID++
	x.listeners[id] = f
	f(x.Index())
	return func() {
		x.pubMu.Lock()
		defer x.pubMu.Unlock()
		delete(x.listeners, id)
	}
}

// Rebuild builds a new index from the source now and publishes it.
func (x *Indexer) Rebuild() {
	ix := x.build()
	x.pubMu.Lock()
	x.mu.Lock()
	x.cur = ix
	x.mu.Unlock()
	for _, f := range x.listeners {
		f(ix)
	}
	x.pubMu.Unlock()
	select {
	case x.updated <- struct{}{}:
	default:
	}
}

// Run rebuilds the index whenever the source changes, until ctx ends.
// It returns nil on cancellation.
func (x *Indexer) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-x.src.Updated():
			x.Rebuild()
		}
	}
}
