package policy

import (
	"sync"
)

// fanout shares one computed value per key among every subscriber of
// that key. A new index recomputes the value of each key that has
// subscribers, once, and wakes the subscribers whose value changed. A
// subscriber that is slow to read only ever sees the latest value: its
// wake-up channel holds one signal and the value is read when it gets to
// it.
type fanout[T any] struct {
	compute func(ix *Index, key string) (T, error)
	equal   func(a, b T) bool

	mu     sync.Mutex
	cur    *Index
	topics map[string]*topic[T]
}

type topic[T any] struct {
	val     T
	err     error
	version uint64
	subs    map[*subscription[T]]struct{}
}

type subscription[T any] struct {
	f    *fanout[T]
	key  string
	wake chan struct{}
	seen uint64
	once sync.Once
}

func newFanout[T any](compute func(*Index, string) (T, error), equal func(a, b T) bool) *fanout[T] {
	return &fanout[T]{compute: compute, equal: equal, topics: map[string]*topic[T]{}}
}

// subscribe registers interest in key, computing its value from the
// current index when nobody watched it yet.
func (f *fanout[T]) subscribe(key string) *subscription[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[key]
	if !ok {
		v, err := f.compute(f.cur, key)
		t = &topic[T]{val: v, err: err, version: 1, subs: map[*subscription[T]]struct{}{}}
		f.topics[key] = t
	}
	s := &subscription[T]{f: f, key: key, wake: make(chan struct{}, 1)}
	t.subs[s] = struct{}{}
	return s
}

// latest returns the current value and whether it is newer than what
// the subscriber has seen.
func (s *subscription[T]) latest() (T, error, bool) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	t := s.f.topics[s.key]
	fresh := t.version != s.seen
	s.seen = t.version
	return t.val, t.err, fresh
}

// close unsubscribes; the topic goes away with its last subscriber.
func (s *subscription[T]) close() {
	s.once.Do(func() {
		s.f.mu.Lock()
		defer s.f.mu.Unlock()
		if t, ok := s.f.topics[s.key]; ok {
			delete(t.subs, s)
			if len(t.subs) == 0 {
				delete(s.f.topics, s.key)
			}
		}
	})
}

// update recomputes every watched key from ix and wakes the subscribers
// of the keys whose value changed.
func (f *fanout[T]) update(ix *Index) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = ix
	for key, t := range f.topics {
		v, err := f.compute(ix, key)
		same := (err == nil) == (t.err == nil)
		if same && err == nil {
			same = f.equal(v, t.val)
		} else if same && err != nil {
			same = err.Error() == t.err.Error()
		}
		if same {
			continue
		}
		t.val, t.err = v, err
		t.version++
		for s := range t.subs {
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}
}

// watchers returns the number of subscriptions, for tests and metrics.
func (f *fanout[T]) watchers() (keys, subs int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		subs += len(t.subs)
	}
	return len(f.topics), subs
}
