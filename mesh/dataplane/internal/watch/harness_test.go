package watch_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/watch"
)

// call is one Resolve the cache made; the test answers it with a feed
// (a stream of endpoint sets) or an error.
type call struct {
	target string
	reply  chan reply
}

type reply struct {
	feed chan []endpoint.Endpoint // nil with err
	err  error
}

// answer answers c with a new feed and returns it: what the test sends
// on it reaches the watch; closing it breaks the watch.
func (c call) answer() chan []endpoint.Endpoint {
	feed := make(chan []endpoint.Endpoint)
	c.reply <- reply{feed: feed}
	return feed
}

// scriptedResolver hands each Resolve to the test on calls. Like the
// real sources, the channel it returns closes when the watch's context
// ends.
type scriptedResolver struct {
	calls chan call
}

func newResolver() *scriptedResolver {
	return &scriptedResolver{calls: make(chan call)}
}

func (r *scriptedResolver) Resolve(ctx context.Context, target string) (<-chan []endpoint.Endpoint, error) {
	c := call{target: target, reply: make(chan reply, 1)}
	select {
	case r.calls <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var rp reply
	select {
	case rp = <-c.reply:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rp.err != nil {
		return nil, rp.err
	}
	out := make(chan []endpoint.Endpoint)
	go func() {
		defer close(out)
		for {
			select {
			case eps, ok := <-rp.feed:
				if !ok {
					return
				}
				select {
				case out <- eps:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// next returns the next Resolve the cache makes.
func (r *scriptedResolver) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-r.calls:
		return c
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("no Resolve call")
		return call{}
	}
}

// ext is what the tests hang on a destination.
type ext struct {
	label string
}

// newCache returns a cache over r whose watches end with the test.
func newCache(t *testing.T, r watch.Resolver, mod func(*watch.DestinationSettings)) *watch.Destinations[ext] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := watch.DestinationSettings{
		Resolver:       r,
		Lifetime:       func() context.Context { return ctx },
		ResolveTimeout: testutil.DefaultTimeout,
		Idle:           time.Minute,
		Log:            slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&s)
	}
	ds := watch.NewDestinations[ext](s)
	t.Cleanup(func() {
		ds.CloseAll()
		cancel()
	})
	return ds
}

// ep returns an endpoint at 10.0.0.n:8080 with weight w.
func ep(n byte, w uint32) endpoint.Endpoint {
	return endpoint.Endpoint{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, n}), 8080), Weight: w}
}

// addrs returns the addresses of a set's endpoints.
func addrs(s *watch.Set) []string {
	var out []string
	for _, b := range s.Endpoints() {
		out = append(out, b.Addr.String())
	}
	return out
}

// done waits for ctx to end, failing the test if it does not.
func done(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(testutil.DefaultTimeout):
		t.Fatalf("%s did not end", what)
	}
}

// get is Get under the test's timeout, requiring success.
func get(t *testing.T, ds *watch.Destinations[ext], target string) *watch.Destination[ext] {
	t.Helper()
	d, err := ds.Get(testutil.Context(t, 0), target)
	require.NoError(t, err, "Get %s", target)
	return d
}
