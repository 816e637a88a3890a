package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
)

// producerDoc is Service data/db with a producer HTTPRoute; consumerTail
// adds a consumer HTTPRoute for it in shop.
const (
	producerDoc = `apiVersion: v1
kind: Service
metadata: {name: db, namespace: data}
spec: {clusterIP: 10.96.0.20, ports: [{name: http, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: producer, namespace: data}
spec:
  parentRefs: [{group: core, kind: Service, name: db, port: 80}]
`
	consumerTail = `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: consumer, namespace: shop}
spec:
  parentRefs: [{group: core, kind: Service, namespace: data, name: db, port: 80}]
`
)

// The client's namespace is the proxy's claim (its context token). A
// claim chooses which routes that watch gets, nothing else: claiming shop
// gets shop's consumer route; a namespace spelled with any bytes (one
// that holds a NUL and the name of a namespace with consumer routes, one
// far longer than any namespace) is a namespace without consumer routes;
// a malformed token is refused. Another client's watch is unchanged by
// any of it.
func TestTheClientsNamespaceIsTheProxysClaimAndChoosesOnlyItsOwnRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := policy.NewMemorySource(objectsFrom(t, producerDoc+consumerTail))
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = x.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	srv, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	srv.Register(gs)
	l := testutil.Listen(t)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := outbound.NewOutboundPoliciesClient(conn)
	rctx := testutil.Context(t, 10*time.Second)

	spec := func(workload string) *outbound.TrafficSpec {
		return &outbound.TrafficSpec{SourceWorkload: workload, Target: &outbound.TrafficSpec_Authority{Authority: "db.data.svc.cluster.local:80"}}
	}
	names := func(p *outbound.OutboundPolicy) []string {
		var out []string
		for _, r := range p.GetProtocol().GetDetect().GetHttp1().GetRoutes() {
			out = append(out, r.GetMetadata().GetResource().GetNamespace()+"/"+r.GetMetadata().GetResource().GetName())
		}
		return out
	}
	honest, err := client.Watch(rctx, spec("ops:client-0"))
	require.NoError(t, err)
	first, err := honest.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"data/producer"}, names(first))

	got, err := client.Get(rctx, spec(`{"ns":"shop","pod":"p"}`))
	require.NoError(t, err)
	assert.Equal(t, []string{"shop/consumer", "data/producer"}, names(got), "claiming shop gets shop's routes (consumer before producer by name)")
	claimer, err := client.Watch(rctx, spec("shop:p"))
	require.NoError(t, err)
	p, err := claimer.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"shop/consumer", "data/producer"}, names(p))

	long := make([]byte, 64<<10)
	for i := range long {
		long[i] = 'a'
	}
	for _, ns := range []string{"shop\u0000x", "x\u0000shop", string(long)} {
		got, err := client.Get(rctx, spec(ns+":p"))
		require.NoError(t, err)
		assert.Equal(t, []string{"data/producer"}, names(got), "namespace %.20q has no consumer routes", ns)
		w, err := client.Watch(rctx, spec(ns+":p"))
		require.NoError(t, err)
		p, err := w.Recv()
		require.NoError(t, err)
		assert.Equal(t, []string{"data/producer"}, names(p))
	}
	for _, bad := range []string{"shop", `{"ns":"shop","pod":"p","extra":1}`, `{"ns":"shop"}`} {
		_, err := client.Get(rctx, spec(bad))
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%q is refused", bad)
	}

	// The consumer route goes: the claimer's watch follows; the honest
	// watch had nothing to read meanwhile, and reads the next change.
	src.Set(objectsFrom(t, producerDoc))
	p, err = claimer.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"data/producer"}, names(p), "shop without its consumer route")
	src.Set(objectsFrom(t, `apiVersion: v1
kind: Service
metadata: {name: db, namespace: data}
spec: {clusterIP: 10.96.0.20, ports: [{name: http, port: 80}]}
`))
	p, err = honest.Recv()
	require.NoError(t, err)
	assert.Equal(t, []string{"/"}, names(p), "the honest watch's next policy is the producer route's deletion (the default route)")
}
