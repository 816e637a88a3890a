package policy

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFanoutComputesEachKeyOncePerIndexWhateverTheSubscriberCount(t *testing.T) {
	var computed atomic.Int64
	gen := 0
	f := newFanout(func(ix *Index, key string) (int, error) {
		computed.Add(1)
		return gen, nil
	}, func(a, b int) bool { return a == b })
	f.update(&Index{})
	subs := make([]*subscription[int], 50)
	for i := range subs {
		subs[i] = f.subscribe("k")
	}
	assert.Equal(t, int64(1), computed.Load(), "the first subscriber computes, the others share")
	keys, n := f.watchers()
	assert.Equal(t, 1, keys)
	assert.Equal(t, 50, n)

	gen = 1
	f.update(&Index{})
	assert.Equal(t, int64(2), computed.Load())
	for _, s := range subs {
		select {
		case <-s.wake:
		default:
			t.Fatal("a subscriber was not woken")
		}
	}
	for _, s := range subs {
		s.close()
		s.close()
	}
	keys, n = f.watchers()
	assert.Zero(t, keys)
	assert.Zero(t, n)
}

func TestFanoutCoalescesASlowSubscriberToTheLatestValue(t *testing.T) {
	gen := 0
	f := newFanout(func(ix *Index, key string) (int, error) { return gen, nil }, func(a, b int) bool { return a == b })
	f.update(&Index{})
	fast, slow := f.subscribe("k"), f.subscribe("k")
	v, _, fresh := slow.latest()
	require.True(t, fresh)
	assert.Equal(t, 0, v)
	fastSeen := []int{}
	v, _, _ = fast.latest()
	fastSeen = append(fastSeen, v)
	for gen = 1; gen <= 100; gen++ {
		f.update(&Index{})
		select {
		case <-fast.wake:
			v, _, fresh := fast.latest()
			require.True(t, fresh)
			fastSeen = append(fastSeen, v)
		case <-time.After(time.Second):
			t.Fatal("the fast subscriber was not woken")
		}
	}
	assert.Len(t, fastSeen, 101, "a reader that keeps up sees every value")
	// The slow one never read: one pending wake-up, then the latest value.
	select {
	case <-slow.wake:
	default:
		t.Fatal("the slow subscriber has no pending wake-up")
	}
	select {
	case <-slow.wake:
		t.Fatal("wake-ups must not queue up")
	default:
	}
	v, _, fresh = slow.latest()
	assert.True(t, fresh)
	assert.Equal(t, 100, v)
	_, _, fresh = slow.latest()
	assert.False(t, fresh)
}

func TestFanoutDoesNotWakeSubscribersWhenTheValueIsUnchanged(t *testing.T) {
	f := newFanout(func(ix *Index, key string) (int, error) { return 7, nil }, func(a, b int) bool { return a == b })
	f.update(&Index{})
	s := f.subscribe("k")
	s.latest()
	f.update(&Index{})
	select {
	case <-s.wake:
		t.Fatal("woken for an unchanged value")
	default:
	}
}
