package policy

import (
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/apis/proxy/outbound"
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

func TestFanoutMovesASubscriberWhenItsKeyStopsOrStartsSharingATopic(t *testing.T) {
	// Keys "a" and "b" share topic "shared" until split is set; then "b"
	// is its own topic with another value.
	split := false
	var computed atomic.Int64
	f := newFanout(func(ix *Index, key string) (int, error) {
		computed.Add(1)
		if key == "b" {
			return 2, nil
		}
		return 1, nil
	}, func(a, b int) bool { return a == b }).withCanon(func(ix *Index, key string) string {
		if split && key == "b" {
			return "b"
		}
		return "shared"
	})
	f.update(&Index{})
	a, b := f.subscribe("a"), f.subscribe("b")
	keys, subs := f.watchers()
	assert.Equal(t, 1, keys, "one topic for both keys")
	assert.Equal(t, 2, subs)
	assert.Equal(t, int64(1), computed.Load(), "computed once for both")
	for _, s := range []*subscription[int]{a, b} {
		v, _, fresh := s.latest()
		require.True(t, fresh)
		assert.Equal(t, 1, v)
	}

	split = true
	f.update(&Index{})
	keys, _ = f.watchers()
	assert.Equal(t, 2, keys)
	select {
	case <-b.wake:
	default:
		t.Fatal("the subscriber whose value changed was not woken")
	}
	v, _, fresh := b.latest()
	assert.True(t, fresh)
	assert.Equal(t, 2, v)
	select {
	case <-a.wake:
		t.Fatal("the subscriber that stayed was woken")
	default:
	}

	// Back to sharing: b's value changes back, a's does not.
	split = false
	f.update(&Index{})
	keys, _ = f.watchers()
	assert.Equal(t, 1, keys, "the emptied topic is gone")
	select {
	case <-b.wake:
	default:
		t.Fatal("b was not woken")
	}
	v, _, fresh = b.latest()
	assert.True(t, fresh)
	assert.Equal(t, 1, v)
	_, _, fresh = a.latest()
	assert.False(t, fresh)

	a.close()
	b.close()
	keys, subs = f.watchers()
	assert.Zero(t, keys)
	assert.Zero(t, subs)
}

func TestFanoutDoesNotWakeAMovedSubscriberWhoseValueIsTheSame(t *testing.T) {
	split := false
	f := newFanout(func(ix *Index, key string) (int, error) { return 1, nil }, func(a, b int) bool { return a == b }).
		withCanon(func(ix *Index, key string) string {
			if split {
				return key
			}
			return "shared"
		})
	f.update(&Index{})
	s := f.subscribe("k")
	s.latest()
	split = true
	f.update(&Index{})
	select {
	case <-s.wake:
		t.Fatal("woken though the new topic holds the value it read")
	default:
	}
	_, _, fresh := s.latest()
	assert.False(t, fresh)
}

func TestOutboundTopicsAreSharedUnlessTheClientsNamespaceHasConsumerRoutes(t *testing.T) {
	const base = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: my-app}
spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}, {name: admin, port: 8080}]}
`
	const consumer = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop-view, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, namespace: my-app, name: web, port: 80}]
`
	build := func(doc string) *Index {
		ms, err := manifest.Decode("test.yaml", []byte(doc))
		require.NoError(t, err)
		o, err := ObjectsFromManifests(ms)
		require.NoError(t, err)
		return Build(o, nil)
	}
	target := func(ns string) string {
		return OutboundTarget{Namespace: "my-app", Name: "web", Port: 80, SourceNamespace: ns}.key()
	}
	other := func(ns string) string {
		return OutboundTarget{Namespace: "my-app", Name: "web", Port: 8080, SourceNamespace: ns}.key()
	}
	producer := build(base)
	withConsumer := build(base + consumer)
	for _, ns := range []string{"", "my-app", "shop", "other", "a\x00b"} {
		assert.Equal(t, target(""), outboundTopic(producer, target(ns)), "without consumer routes, %q shares the topic", ns)
		assert.Equal(t, OutboundTarget{Namespace: "my-app", Name: "web", Port: 80, SourceNamespace: ns}, parseOutboundKey(target(ns)), "the key reads back")
	}
	assert.Equal(t, target("shop"), outboundTopic(withConsumer, target("shop")), "shop's consumer route makes its own topic")
	assert.Equal(t, target(""), outboundTopic(withConsumer, target("other")))
	assert.Equal(t, target(""), outboundTopic(withConsumer, target("my-app")))
	assert.Equal(t, other(""), outboundTopic(withConsumer, other("shop")), "shop's route is for port 80 only")
	addr := OutboundTarget{Addr: netip.MustParseAddrPort("1.1.1.1:80"), SourceNamespace: "shop"}.key()
	assert.Equal(t, addr, outboundTopic(withConsumer, addr), "address keys are left alone")
}

// BenchmarkOutboundFanoutUpdate is the cost of one index change for the
// Outbound API's shared watches: 2,000 watches of 10 Service ports from
// 200 client namespaces, none with consumer routes, so they share 10
// topics. Per op: one update (10 policies computed and compared, and, with
// the client's namespace in the key, the topic of each of the 2,000
// watches checked). "namespace-blind" is the same without the namespace
// in the key and without canon, as the fan-out was before consumer
// routes.
func BenchmarkOutboundFanoutUpdate(b *testing.B) {
	var doc strings.Builder
	for i := range 10 {
		fmt.Fprintf(&doc, "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: data}\nspec: {clusterIP: 10.96.1.%d, ports: [{name: http, port: 80}]}\n", i, i+1)
	}
	ms, err := manifest.Decode("bench.yaml", []byte(doc.String()))
	require.NoError(b, err)
	o, err := ObjectsFromManifests(ms)
	require.NoError(b, err)
	ix := Build(o, nil)
	for _, tc := range []struct {
		name  string
		canon bool
	}{{"client-namespace", true}, {"namespace-blind", false}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFanout(func(ix *Index, key string) (*outbound.OutboundPolicy, error) {
				return ix.OutboundPolicy(parseOutboundKey(key))
			}, func(a, b *outbound.OutboundPolicy) bool { return proto.Equal(a, b) })
			if tc.canon {
				f.withCanon(outboundTopic)
			}
			f.update(ix)
			for i := range 2000 {
				t := OutboundTarget{Namespace: "data", Name: fmt.Sprintf("svc-%d", i%10), Port: 80}
				if tc.canon {
					t.SourceNamespace = fmt.Sprintf("client-%d", i%200)
				}
				f.subscribe(t.key())
			}
			keys, _ := f.watchers()
			require.Equal(b, 10, keys)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f.update(ix)
			}
		})
	}
}
