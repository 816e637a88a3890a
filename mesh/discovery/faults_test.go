package discovery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"go.uber.org/goleak"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newIndex(t *testing.T, objs ...runtime.Object) *discovery.Index {
	t.Helper()
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idx.Close() })
	require.NoError(t, idx.Upsert(objs...))
	return idx
}

// bigSlice is a slice of n endpoints 10.1.x.y without pods.
func bigSlice(name string, from, n int) *discoveryv1.EndpointSlice {
	s := dt.EndpointSlice("shop", name, "web", httpPort)
	for i := from; i < from+n; i++ {
		s.Endpoints = append(s.Endpoints, dt.Endpoint(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), ""))
	}
	return s
}

func TestTenThousandSubscriptionsFromOneClientShareOneWatch(t *testing.T) {
	idx := newIndex(t, webSvc(), bigSlice("web-a", 0, 10))
	conn := dt.Serve(t, idx)
	client := pb.NewDestinationClient(conn)
	// The bound only keeps a hung test from running forever: under -race on
	// two busy cores, opening and serving 10,000 streams took over a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	const n = 10000
	streams := make([]pb.Destination_GetClient, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		s, err := client.Get(ctx, &pb.GetDestination{Path: web})
		require.NoError(t, err)
		streams[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := s.Recv()
			if err == nil && len(m.GetAdd().GetAddrs()) != 10 {
				err = fmt.Errorf("first message %v", m)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := idx.Stats()
	assert.Equal(t, 1, st.EndpointTopics, "one shared watch")
	assert.Equal(t, n, st.Subscriptions)

	// One change reaches every subscriber.
	require.NoError(t, idx.Upsert(bigSlice("web-a", 0, 11)))
	var got sync.WaitGroup
	errs = make(chan error, n)
	for _, s := range streams {
		got.Add(1)
		go func() {
			defer got.Done()
			m, err := s.Recv()
			if err == nil && len(m.GetAdd().GetAddrs()) != 1 {
				err = fmt.Errorf("delta %v", m)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	got.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Unsubscribing frees the watch.
	cancel()
	testutil.Eventually(t, 30*time.Second, func() bool { s := idx.Stats(); return s.Subscriptions == 0 && s.EndpointTopics == 0 }, "every subscription and the topic are freed")
}

func TestSliceOfAThousandEndpointsArrivesWhole(t *testing.T) {
	idx := newIndex(t, webSvc(), bigSlice("web-a", 0, 1000), bigSlice("web-b", 1000, 1500))
	conn := dt.Serve(t, idx)
	s := dt.Get(t, conn, web, "")
	first := s.Next(t)
	require.NotNil(t, first.GetAdd())
	assert.Len(t, first.GetAdd().GetAddrs(), 1000, "adds are chunked at 1000 addresses")
	st := s.WaitFor(t, "all 2500 endpoints", func(st dt.State) bool { return len(st.Endpoints) == 2500 })
	assert.Equal(t, 3, st.Messages)
	s.Quiet(t, 100*time.Millisecond)
}

func TestRapidChurnConvergesAndSendsOnlyDeltas(t *testing.T) {
	base := bigSlice("web-a", 0, 100)
	idx := newIndex(t, webSvc(), base)
	conn := dt.Serve(t, idx)
	s := dt.Get(t, conn, web, "")
	s.WaitFor(t, "the base set", func(st dt.State) bool { return len(st.Endpoints) == 100 })

	extra := bigSlice("web-b", 500, 1)
	for i := range 1000 {
		if i%2 == 0 {
			require.NoError(t, idx.Upsert(extra))
		} else {
			require.NoError(t, idx.Delete(extra))
		}
	}
	require.NoError(t, idx.Upsert(bigSlice("web-c", 900, 1))) // a marker after the churn
	// Adds come before removes, so wait for the whole final state.
	st := s.WaitFor(t, "the marker without the churned endpoint", func(st dt.State) bool {
		return st.Has("10.1.3.151:8080") && !st.Has("10.1.2.1:8080")
	})
	assert.Len(t, st.Endpoints, 101)
	s.Quiet(t, 100*time.Millisecond)
	assert.Len(t, s.State().Endpoints, 101, "nothing stale arrives afterwards")
	assert.LessOrEqual(t, st.Messages, 1002, "at most one message per change; slow readers get fewer")
}

func TestSlowSubscriberIsCoalescedAndNeverBlocksOthers(t *testing.T) {
	idx := newIndex(t, webSvc(), bigSlice("web-a", 0, 1))
	slow, err := idx.SubscribeEndpoints(web)
	require.NoError(t, err)
	defer slow.Close()
	fast, err := idx.SubscribeEndpoints(web)
	require.NoError(t, err)
	defer fast.Close()

	for i := 2; i <= 200; i++ {
		require.NoError(t, idx.Upsert(bigSlice("web-a", 0, i))) // never blocks on the slow one
		select {
		case <-fast.Updated():
		case <-time.After(5 * time.Second):
			t.Fatal("the fast subscriber was not told")
		}
		require.Len(t, fast.Latest().Set.Endpoints, i)
	}
	// The slow one wakes once and sees only the latest state.
	select {
	case <-slow.Updated():
	default:
		t.Fatal("the slow subscriber has no pending signal")
	}
	assert.Len(t, slow.Latest().Set.Endpoints, 200)
	select {
	case <-slow.Updated():
		t.Fatal("signals were not coalesced")
	default:
	}
}

func TestClosingTheIndexEndsStreamsWithUnavailable(t *testing.T) {
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	conn := dt.Serve(t, idx)
	s := dt.Get(t, conn, web, "")
	s.Next(t)
	require.NoError(t, idx.Close())
	require.NoError(t, idx.Close())
	assert.ErrorContains(t, s.Err(t), "Unavailable")
	_, err = idx.SubscribeEndpoints(web)
	assert.ErrorIs(t, err, discovery.ErrClosed)
	assert.ErrorIs(t, idx.Upsert(webSvc()), discovery.ErrClosed)
}

func TestProfileTopicsAreSharedPerClientNamespaceAndFreed(t *testing.T) {
	idx := newIndex(t, webSvc())
	var subs []*discovery.Subscription[*discovery.ProfileSnapshot]
	for _, tok := range []discovery.ContextToken{{}, {Namespace: "a", Pod: "p1"}, {Namespace: "a", Pod: "p2"}, {Namespace: "b"}} {
		s, err := idx.SubscribeProfile(web, tok)
		require.NoError(t, err)
		subs = append(subs, s)
	}
	assert.Equal(t, 3, idx.Stats().ProfileTopics, "pods in one namespace share a profile watch")
	for _, s := range subs {
		s.Close()
		s.Close()
	}
	assert.Equal(t, 0, idx.Stats().ProfileTopics)
}
