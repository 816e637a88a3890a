package resolver_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"github.com/weftmesh/weft/mesh/discovery/resolver"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backend is a real gRPC server (the health service) that counts calls.
type backend struct {
	port  int32
	calls atomic.Int64
}

func startBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{}
	lis := testutil.Listen(t)
	b.port = int32(lis.Addr().(*net.TCPAddr).Port)
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		b.calls.Add(1)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	return b
}

// apiObjects describes service api, port 80, whose endpoints are the
// backends on 127.0.0.1 (one slice per backend, since their ports differ).
func apiObjects(bs ...*backend) []runtime.Object {
	objs := []runtime.Object{dt.Namespace("shop"), dt.Service("shop", "api", "10.96.0.30", dt.ServicePort{Name: "grpc", Port: 80, TargetPort: 9000})}
	for i, b := range bs {
		objs = append(objs, dt.EndpointSlice("shop", "api-"+strconv.Itoa(i), "api", []dt.SlicePort{{Name: "grpc", Port: b.port}}, dt.Endpoint("127.0.0.1", "")))
	}
	return objs
}

func setup(t *testing.T, objs []runtime.Object) (*discovery.Index, *client.Client) {
	t.Helper()
	idx, err := discovery.NewIndex()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idx.Close() })
	require.NoError(t, idx.Replace(objs))
	conn := dt.Serve(t, idx)
	c, err := client.New(context.Background(), conn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return idx, c
}

func TestGRPCClientBalancesOverDiscoveredEndpointsAndFollowsChanges(t *testing.T) {
	b1, b2 := startBackend(t), startBackend(t)
	idx, c := setup(t, apiObjects(b1, b2))
	conn, err := grpc.NewClient("weft:///api.shop.svc.cluster.local:80",
		grpc.WithResolvers(resolver.NewBuilder(c)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx := testutil.Context(t, 0)

	testutil.Eventually(t, 0, func() bool {
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		require.NoError(t, err)
		return b1.calls.Load() > 0 && b2.calls.Load() > 0
	}, "calls reach both backends")

	require.NoError(t, idx.Replace(apiObjects(b2)))
	testutil.Eventually(t, 0, func() bool {
		before := b1.calls.Load()
		for range 10 {
			_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
		}
		return b1.calls.Load() == before
	}, "calls stop reaching the removed backend")
}

func TestMalformedAuthorityFailsCallsWithTheReason(t *testing.T) {
	_, c := setup(t, nil)
	conn, err := grpc.NewClient("weft:///api.shop.svc.example.org:80",
		grpc.WithResolvers(resolver.NewBuilder(c)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.Error(t, err)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Contains(t, err.Error(), "InvalidArgument")
}

// recorder is a resolver.ClientConn that keeps the states it is given.
type recorder struct {
	mu     sync.Mutex
	states []grpcresolver.State
	errs   []error
}

func (r *recorder) UpdateState(s grpcresolver.State) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, s)
	return nil
}
func (r *recorder) ReportError(err error)                                { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() }
func (r *recorder) NewAddress([]grpcresolver.Address)                    {}
func (r *recorder) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

func (r *recorder) last() (grpcresolver.State, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return grpcresolver.State{}, false
	}
	return r.states[len(r.states)-1], true
}

func TestAddressesCarryTheEndpointsDiscoveryData(t *testing.T) {
	objs := []runtime.Object{dt.Namespace("shop"), dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080}),
		dt.Pod("shop", "web-1", "10.0.0.1", "web", dt.Meshed("weft", 0)),
		dt.EndpointSlice("shop", "web-a", "web", []dt.SlicePort{{Name: "http", Port: 8080}}, dt.Endpoint("10.0.0.1", "web-1"))}
	_, c := setup(t, objs)
	b := resolver.NewBuilder(c, resolver.WithScheme("mesh"))
	assert.Equal(t, "mesh", b.Scheme())
	rec := &recorder{}
	target := grpcresolver.Target{}
	target.URL.Scheme, target.URL.Path = "mesh", "/web.shop.svc.cluster.local:80"
	r, err := b.Build(target, rec, grpcresolver.BuildOptions{})
	require.NoError(t, err)
	defer r.Close()
	testutil.Eventually(t, 0, func() bool { _, ok := rec.last(); return ok }, "the condition")
	st, _ := rec.last()
	require.Len(t, st.Addresses, 1)
	assert.Equal(t, "10.0.0.1:8080", st.Addresses[0].Addr)
	e, ok := resolver.Endpoint(st.Addresses[0])
	require.True(t, ok)
	assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", e.Identity)
	assert.Equal(t, discovery.HintH2, e.Hint)
	r.ResolveNow(grpcresolver.ResolveNowOptions{})
	r.Close()
	r.Close()
}
