package policy

import (
	"sync"
)

// Source supplies the objects policy reads. Implementations: the
// in-memory MemorySource beside this interface, mesh/policy/static
// (files on disk) and mesh/policy/kubernetes (informers).
type Source interface {
	// Objects returns the current snapshot. The caller must not change it.
	Objects() *Objects
	// Updated receives after the snapshot changes. Changes are coalesced:
	// one receive may stand for several changes.
	Updated() <-chan struct{}
}

// MemorySource is a Source whose snapshot the caller sets.
type MemorySource struct {
	mu      sync.Mutex
	objs    *Objects
	updated chan struct{}
}

// NewMemorySource returns a source holding objs (nil for none).
func NewMemorySource(objs *Objects) *MemorySource {
	if objs == nil {
		objs = &Objects{}
	}
	return &MemorySource{objs: objs, updated: make(chan struct{}, 1)}
}

// Objects returns the current snapshot.
func (m *MemorySource) Objects() *Objects {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs
}

// Updated receives after Set.
func (m *MemorySource) Updated() <-chan struct{} { return m.updated }

// Set replaces the snapshot and signals Updated.
func (m *MemorySource) Set(objs *Objects) {
	if objs == nil {
		objs = &Objects{}
	}
	m.mu.Lock()
	m.objs = objs
	m.mu.Unlock()
	select {
	case m.updated <- struct{}{}:
	default:
	}
}
