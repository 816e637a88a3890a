package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const web = "web.shop.svc.cluster.local:80"

func webObjects(ips ...string) []runtime.Object {
	objs := []runtime.Object{dt.Namespace("shop"), dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080})}
	slice := dt.EndpointSlice("shop", "web-a", "web", []dt.SlicePort{{Name: "http", Port: 8080}})
	for i, ip := range ips {
		name := "web-" + string(rune('a'+i))
		objs = append(objs, dt.Pod("shop", name, ip, "web", dt.Meshed("weft", 0)))
		slice.Endpoints = append(slice.Endpoints, dt.Endpoint(ip, name))
	}
	return append(objs, slice)
}

// server is a Destination server on a fixed loopback address that a test
// can stop and start again.
type server struct {
	t    *testing.T
	addr string
	gs   *grpc.Server
	done chan struct{}
}

func startServer(t *testing.T, addr string, src discovery.Source) *server {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	srv, err := discovery.NewServer(src)
	require.NoError(t, err)
	s := &server{t: t, addr: lis.Addr().String(), gs: grpc.NewServer(), done: make(chan struct{})}
	srv.Register(s.gs)
	go func() { defer close(s.done); _ = s.gs.Serve(lis) }()
	t.Cleanup(s.stop)
	return s
}

func (s *server) stop() {
	s.gs.Stop()
	<-s.done
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func newIndex(t *testing.T, objs ...runtime.Object) *discovery.Index {
	t.Helper()
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	require.NoError(t, idx.Replace(objs))
	t.Cleanup(func() { _ = idx.Close() })
	return idx
}

func waitSet(t *testing.T, w *client.Watch, what string, cond func(discovery.EndpointSet) bool) discovery.EndpointSet {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if set, ok := w.Endpoints(); ok && cond(set) {
			return set
		}
		select {
		case <-w.Updated():
		case <-deadline:
			set, _ := w.Endpoints()
			t.Fatalf("timed out waiting for %s; have %d endpoints, err %v", what, len(set.Endpoints), w.Err())
		}
	}
}

func addrs(set discovery.EndpointSet) []string {
	var out []string
	for _, e := range set.Endpoints {
		out = append(out, e.Addr.String())
	}
	return out
}

func TestWatchFollowsTheEndpointSet(t *testing.T) {
	ctx := testutil.Context(t, 0)
	idx := newIndex(t, webObjects("10.0.0.1", "10.0.0.2")...)
	srv := startServer(t, "127.0.0.1:0", idx)
	c, err := client.New(ctx, dial(t, srv.addr), client.WithContextToken(`{"ns":"shop"}`))
	require.NoError(t, err)
	defer c.Close()

	w, err := c.Watch(ctx, web)
	require.NoError(t, err)
	require.NoError(t, w.Wait(ctx))
	set := waitSet(t, w, "two endpoints", func(s discovery.EndpointSet) bool { return len(s.Endpoints) == 2 })
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, addrs(set))
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", set.Endpoints[0].Identity)
	assert.Equal(t, map[string]string{"namespace": "shop", "service": "web"}, set.MetricLabels)

	require.NoError(t, idx.Replace(webObjects("10.0.0.2", "10.0.0.3")))
	set = waitSet(t, w, "the new set", func(s discovery.EndpointSet) bool {
		return len(s.Endpoints) == 2 && s.Endpoints[1].Addr.String() == "10.0.0.3:8080"
	})
	assert.Equal(t, []string{"10.0.0.2:8080", "10.0.0.3:8080"}, addrs(set))
	assert.NoError(t, w.Err())
	w.Close()
	w.Close()
}

func TestWatchKeepsTheLastSetWhileTheServerRestartsThenConverges(t *testing.T) {
	ctx := testutil.Context(t, 0)
	idx := newIndex(t, webObjects("10.0.0.1", "10.0.0.2")...)
	srv := startServer(t, "127.0.0.1:0", idx)
	addr := srv.addr
	c, err := client.New(ctx, dial(t, addr), client.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Watch(ctx, web)
	require.NoError(t, err)
	waitSet(t, w, "two endpoints", func(s discovery.EndpointSet) bool { return len(s.Endpoints) == 2 })

	srv.stop()
	testutil.Eventually(t, 0, func() bool { return w.Err() != nil }, "the watch notices")
	set, _ := w.Endpoints()
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, addrs(set), "the last known set is still served")
	assert.Contains(t, w.Err().Error(), "keeping the last known state")

	// The server comes back on the same address with a different view.
	idx2 := newIndex(t, webObjects("10.0.0.2", "10.0.0.9")...)
	var seen [][]string
	startServer(t, addr, idx2)
	deadline := time.After(10 * time.Second)
	for {
		set, _ := w.Endpoints()
		seen = append(seen, addrs(set))
		if len(set.Endpoints) == 2 && set.Endpoints[1].Addr.String() == "10.0.0.9:8080" {
			break
		}
		select {
		case <-w.Updated():
		case <-deadline:
			t.Fatalf("did not converge; saw %v, err %v", seen, w.Err())
		}
	}
	for _, s := range seen {
		assert.NotEmpty(t, s, "the set never empties while reconnecting")
	}
	assert.NoError(t, w.Err())
}

func TestWatchOfMalformedAuthorityFailsPermanently(t *testing.T) {
	ctx := testutil.Context(t, 0)
	srv := startServer(t, "127.0.0.1:0", newIndex(t))
	c, err := client.New(ctx, dial(t, srv.addr))
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Watch(ctx, "web.shop.svc.example.org:80")
	require.NoError(t, err)
	err = w.Wait(ctx)
	require.Error(t, err)
	assert.Equal(t, codes.InvalidArgument, status.Code(errorsUnwrapStatus(err)))
	_, known := w.Endpoints()
	assert.False(t, known)

	_, err = c.Watch(ctx, "")
	assert.Error(t, err)
}

// errorsUnwrapStatus finds the gRPC status inside a wrapped error.
func errorsUnwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

func TestWaitGivesUpWithTheContextWhenNoServerAnswers(t *testing.T) {
	ctx := testutil.Context(t, 0)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // nothing listens there now
	c, err := client.New(ctx, dial(t, addr), client.WithBackoff(10*time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	w, err := c.Watch(ctx, web)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = w.Wait(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "last error")
}

func TestProfileWatchFollowsServiceProfiles(t *testing.T) {
	ctx := testutil.Context(t, 0)
	idx := newIndex(t, webObjects("10.0.0.1")...)
	srv := startServer(t, "127.0.0.1:0", idx)
	c, err := client.New(ctx, dial(t, srv.addr))
	require.NoError(t, err)
	defer c.Close()
	w, err := c.WatchProfile(ctx, web)
	require.NoError(t, err)
	require.NoError(t, w.Wait(ctx))
	p, ok := w.Profile()
	require.True(t, ok)
	assert.Equal(t, "web.shop.svc.cluster.local", p.FullyQualifiedName)
	assert.Equal(t, discovery.DefaultRetryBudget(), p.RetryBudget)

	require.NoError(t, idx.Upsert(dt.ServiceProfile("shop", "web.shop.svc.cluster.local", dt.Route("books", "GET", "/books"))))
	deadline := time.After(10 * time.Second)
	for {
		if p, _ := w.Profile(); len(p.Routes) == 1 {
			assert.Equal(t, "books", p.Routes[0].Name)
			assert.Equal(t, "shop/web.shop.svc.cluster.local", p.Source)
			break
		}
		select {
		case <-w.Updated():
		case <-deadline:
			t.Fatal("profile update not seen")
		}
	}
}

func TestClientCloseStopsAllWatches(t *testing.T) {
	ctx := testutil.Context(t, 0)
	idx := newIndex(t, webObjects("10.0.0.1")...)
	srv := startServer(t, "127.0.0.1:0", idx)
	c, err := client.New(ctx, dial(t, srv.addr))
	require.NoError(t, err)
	for range 20 {
		w, err := c.Watch(ctx, web)
		require.NoError(t, err)
		require.NoError(t, w.Wait(ctx))
	}
	require.NoError(t, c.Close())
	testutil.Eventually(t, 0, func() bool { return idx.Stats().Subscriptions == 0 }, "the server sees every stream end")
}

func TestNewRefusesBadOptions(t *testing.T) {
	conn := dial(t, "127.0.0.1:1")
	_, err := client.New(context.Background(), conn, client.WithBackoff(0, time.Second))
	assert.Error(t, err)
	_, err = client.New(context.Background(), conn, client.WithContextToken("{bad"))
	assert.Error(t, err)
	_, err = client.New(context.Background(), nil)
	assert.Error(t, err)
}

// TestNewsContextBoundsTheStartOnly: the context given to New bounds the
// start only; a watch keeps following the server after it ends, until
// Close.
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	ctx := testutil.Context(t, 0)
	idx := newIndex(t, webObjects("10.0.0.1")...)
	srv := startServer(t, "127.0.0.1:0", idx)
	startCtx, endStart := context.WithCancel(ctx)
	c, err := client.New(startCtx, dial(t, srv.addr))
	require.NoError(t, err)
	defer c.Close()
	endStart()

	w, err := c.Watch(ctx, web)
	require.NoError(t, err)
	require.NoError(t, w.Wait(ctx))
	require.NoError(t, idx.Replace(webObjects("10.0.0.1", "10.0.0.2")))
	set := waitSet(t, w, "the second endpoint after New's context ended", func(s discovery.EndpointSet) bool { return len(s.Endpoints) == 2 })
	assert.Equal(t, []string{"10.0.0.1:8080", "10.0.0.2:8080"}, addrs(set))
	require.NoError(t, w.Err())

	require.NoError(t, c.Close())
	testutil.Eventually(t, 0, func() bool { return idx.Stats().Subscriptions == 0 }, "Close ends the watch")

	_, err = client.New(startCtx, dial(t, srv.addr))
	assert.ErrorIs(t, err, context.Canceled, "New with an ended context fails")
}
