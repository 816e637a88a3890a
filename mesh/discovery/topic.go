package discovery

import (
	"sync"
	"sync/atomic"
)

// Topic holds the latest value of one watched destination and wakes its
// subscribers when it changes. It is the fan-out at the heart of the
// Destination server: however many subscribers a topic has, the value is
// computed once and shared; Publish never blocks, and a subscriber that is
// slow to look only ever sees the latest value (intermediate values are
// coalesced away).
//
// Values must be treated as immutable once published. Sources outside this
// package can use Topic to implement Source.
type Topic[T any] struct {
	cur atomic.Pointer[T]

	mu     sync.Mutex
	subs   map[*Subscription[T]]struct{}
	closed bool
	done   chan struct{}
	onIdle func()
}

// NewTopic returns a topic holding initial. onIdle, when not nil, is called
// (without locks held) each time the last subscriber leaves, so the owner
// can drop the topic; the owner must check Len again under its own lock
// before it does.
func NewTopic[T any](initial T, onIdle func()) *Topic[T] {
	t := &Topic[T]{subs: map[*Subscription[T]]struct{}{}, done: make(chan struct{}), onIdle: onIdle}
	t.cur.Store(&initial)
	return t
}

// Latest returns the current value.
func (t *Topic[T]) Latest() T { return *t.cur.Load() }

// Publish replaces the value and wakes every subscriber. It never blocks.
func (t *Topic[T]) Publish(v T) {
	t.cur.Store(&v)
	t.mu.Lock()
	defer t.mu.Unlock()
	for s := range t.subs {
		select {
		case s.ch <- struct{}{}:
		default: // already woken: it will read the latest value
		}
	}
}

// Subscribe adds a subscriber. It returns nil when the topic is closed.
func (t *Topic[T]) Subscribe() *Subscription[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	s := &Subscription[T]{topic: t, ch: make(chan struct{}, 1)}
	t.subs[s] = struct{}{}
	return s
}

// Len returns the number of subscribers.
func (t *Topic[T]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.subs)
}

// Close ends the topic: subscribers' Done channels close and Subscribe
// returns nil from now on. Close is idempotent.
func (t *Topic[T]) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
}

func (t *Topic[T]) remove(s *Subscription[T]) {
	t.mu.Lock()
	_, ok := t.subs[s]
	delete(t.subs, s)
	idle := ok && len(t.subs) == 0
	t.mu.Unlock()
	if idle && t.onIdle != nil {
		t.onIdle()
	}
}

// Subscription is one subscriber's view of a Topic.
type Subscription[T any] struct {
	topic *Topic[T]
	ch    chan struct{}
	once  sync.Once
}

// Latest returns the topic's current value.
func (s *Subscription[T]) Latest() T { return s.topic.Latest() }

// Updated receives a signal after the value changes. Signals coalesce: one
// signal may stand for several changes, so read Latest after each.
func (s *Subscription[T]) Updated() <-chan struct{} { return s.ch }

// Done is closed when the topic's source shuts down.
func (s *Subscription[T]) Done() <-chan struct{} { return s.topic.done }

// Close unsubscribes. It is idempotent.
func (s *Subscription[T]) Close() {
	s.once.Do(func() { s.topic.remove(s) })
}
