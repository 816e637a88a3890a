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
//
// A subscriber asks for a key; canon (when set) names the topic that key
// shares in a given index. Keys that the index answers alike share one
// topic and one computed value; when a new index answers a key apart
// from the others (or alike again), its subscribers move to the topic
// canon names now, and are woken only if the value they see changes.
type fanout[T any] struct {
	compute func(ix *Index, key string) (T, error)
	equal   func(a, b T) bool
	canon   func(ix *Index, key string) string

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
	f *fanout[T]
	// want is the key asked for; key the topic it shares now.
	want string
	key  string
	wake chan struct{}
	seen uint64
	once sync.Once
}

func newFanout[T any](compute func(*Index, string) (T, error), equal func(a, b T) bool) *fanout[T] {
	return &fanout[T]{compute: compute, equal: equal, topics: map[string]*topic[T]{}}
}

// withCanon sets the function naming the topic a key shares.
func (f *fanout[T]) withCanon(canon func(ix *Index, key string) string) *fanout[T] {
	f.canon = canon
	return f
}

func (f *fanout[T]) topicKey(ix *Index, want string) string {
	if f.canon == nil {
		return want
	}
	return f.canon(ix, want)
}

// topicFor returns the topic of key, computing its value from ix when
// nobody watched it yet. f.mu is held.
func (f *fanout[T]) topicFor(ix *Index, key string) *topic[T] {
	t, ok := f.topics[key]
	if !ok {
		v, err := f.compute(ix, key)
		t = &topic[T]{val: v, err: err, version: 1, subs: map[*subscription[T]]struct{}{}}
		f.topics[key] = t
	}
	return t
}

// subscribe registers interest in key, computing its value from the
// current index when nobody watched it (or a key sharing its topic) yet.
func (f *fanout[T]) subscribe(want string) *subscription[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := f.topicKey(f.cur, want)
	t := f.topicFor(f.cur, key)
	s := &subscription[T]{f: f, want: want, key: key, wake: make(chan struct{}, 1)}
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

func (f *fanout[T]) same(av T, aerr error, bv T, berr error) bool {
	if (aerr == nil) != (berr == nil) {
		return false
	}
	if aerr != nil {
		return aerr.Error() == berr.Error()
	}
	return f.equal(av, bv)
}

func (s *subscription[T]) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// update recomputes every watched key from ix and wakes the subscribers
// of the keys whose value changed; then it moves each subscriber whose
// key shares another topic in ix (see canon).
func (f *fanout[T]) update(ix *Index) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cur = ix
	for key, t := range f.topics {
		v, err := f.compute(ix, key)
		if f.same(v, err, t.val, t.err) {
			continue
		}
		t.val, t.err = v, err
		t.version++
		for s := range t.subs {
			s.signal()
		}
	}
	if f.canon == nil {
		return
	}
	var moving []*subscription[T]
	for key, t := range f.topics {
		for s := range t.subs {
			if f.canon(ix, s.want) != key {
				moving = append(moving, s)
			}
		}
	}
	for _, s := range moving {
		from := f.topics[s.key]
		delete(from.subs, s)
		if len(from.subs) == 0 {
			delete(f.topics, s.key)
		}
		s.key = f.canon(ix, s.want)
		to := f.topicFor(ix, s.key)
		to.subs[s] = struct{}{}
		// A subscriber that had read its topic's latest value and finds
		// the same value in the new topic has nothing new to read.
		if s.seen == from.version && f.same(from.val, from.err, to.val, to.err) {
			s.seen = to.version
			continue
		}
		s.seen = 0
		s.signal()
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
