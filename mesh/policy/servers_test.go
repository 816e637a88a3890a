package policy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/manifest"
	"github.com/weftmesh/weft/apis/proxy/inbound"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func objectsFrom(t *testing.T, doc string) *policy.Objects {
	t.Helper()
	ms, err := manifest.Decode("test.yaml", []byte(doc))
	require.NoError(t, err)
	o, err := policy.ObjectsFromManifests(ms)
	require.NoError(t, err)
	return o
}

type servers struct {
	src  *policy.MemorySource
	x    *policy.Indexer
	in   inbound.InboundServerPoliciesClient
	out  outbound.OutboundPoliciesClient
	stop func()
}

func startServers(t *testing.T, doc string) *servers {
	t.Helper()
	src := policy.NewMemorySource(objectsFrom(t, doc))
	ctx, cancel := context.WithCancel(context.Background())
	x, err := policy.NewIndexer(ctx, src)
	require.NoError(t, err)
	is, err := policy.NewInboundServer(x)
	require.NoError(t, err)
	os, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	gs := grpc.NewServer()
	is.Register(gs)
	os.Register(gs)
	l := testutil.Listen(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = gs.Serve(l) }()
	go func() { defer wg.Done(); _ = x.Run(ctx) }()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	s := &servers{src: src, x: x, in: inbound.NewInboundServerPoliciesClient(conn), out: outbound.NewOutboundPoliciesClient(conn)}
	s.stop = func() {
		is.Drain()
		os.Drain()
		gs.GracefulStop()
		cancel()
		wg.Wait()
		_ = conn.Close()
	}
	return s
}

func seedDoc(withPolicy bool) string {
	doc := fmt.Sprintf(nsYAML, "", "") + fmt.Sprintf(serverYAML, "  accessPolicy: deny\n")
	if withPolicy {
		doc += `---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata: {name: web-api-gateway, namespace: my-app}
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{kind: ServiceAccount, name: api-gateway}]
`
	}
	return doc
}

func TestWatchPortSharesOnePolicyAmongWatchersAndEndsCleanlyOnDrain(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := startServers(t, seedDoc(true))
	ctx := testutil.Context(t, 10*time.Second)

	const watchers = 20
	streams := make([]inbound.InboundServerPolicies_WatchPortClient, watchers)
	for i := range streams {
		st, err := s.in.WatchPort(ctx, &inbound.PortSpec{Workload: `{"ns":"my-app","pod":"web-0"}`, Port: 8080})
		require.NoError(t, err)
		first, err := st.Recv()
		require.NoError(t, err)
		require.Len(t, first.Authorizations, 1)
		streams[i] = st
	}
	s.src.Set(objectsFrom(t, seedDoc(false)))
	for _, st := range streams {
		next, err := st.Recv()
		require.NoError(t, err)
		srv, err := authz.FromProto(next)
		require.NoError(t, err)
		assert.Empty(t, srv.Authorizations)
	}
	// The drained server ends every stream with OK.
	s.stop()
	for _, st := range streams {
		_, err := st.Recv()
		assert.Error(t, err)
		assert.NotEqual(t, codes.Internal, status.Code(err))
	}
}

func TestWatchPortOfAnUnknownPodIsNotFound(t *testing.T) {
	s := startServers(t, seedDoc(true))
	defer s.stop()
	ctx := testutil.Context(t, 10*time.Second)
	st, err := s.in.WatchPort(ctx, &inbound.PortSpec{Workload: "my-app:nope", Port: 8080})
	require.NoError(t, err)
	_, err = st.Recv()
	assert.Equal(t, codes.NotFound, status.Code(err))
	for _, bad := range []*inbound.PortSpec{{Workload: "", Port: 1}, {Workload: "my-app:web-0", Port: 0}, {Workload: `{"ns":"a","pod":"b","x":1}`, Port: 1}, {Workload: "a:b:c", Port: 1}} {
		_, err := s.in.GetPort(ctx, bad)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", bad)
	}
}

const serviceDoc = `---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: my-app
  annotations:
    balancer.linkerd.io/failure-accrual: consecutive
    balancer.linkerd.io/failure-accrual-consecutive-max-failures: "4"
    balancer.linkerd.io/failure-accrual-consecutive-min-penalty: 5s
    timeout.linkerd.io/request: 10s
    retry.linkerd.io/http: 5xx
spec:
  clusterIP: 10.96.0.10
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: http}
  - {name: grpc, port: 9090, appProtocol: linkerd.io/grpc}
  - {name: db, port: 5432}
  - {name: raw, port: 7000, appProtocol: mysql}
  - {name: mysql-admin, port: 3306, appProtocol: http}
---
apiVersion: v1
kind: Service
metadata: {name: web-canary, namespace: my-app}
spec:
  selector: {app: web-canary}
  ports: [{name: http, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web-reads
  namespace: my-app
  annotations:
    retry.linkerd.io/http: gateway-error,429
    retry.linkerd.io/limit: "3"
    retry.linkerd.io/timeout: 400ms
    timeout.linkerd.io/response: 2s
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules:
  - matches: [{method: GET, path: {type: PathPrefix, value: /items}}]
    backendRefs:
    - {name: web, port: 80, weight: 90}
    - {name: web-canary, port: 80, weight: 10}
    - {name: missing, port: 80, weight: 1}
`

func TestOutboundPolicyCarriesRoutesRetriesTimeoutsAndFailureAccrual(t *testing.T) {
	s := startServers(t, seedDoc(true)+serviceDoc)
	defer s.stop()
	ctx := testutil.Context(t, 10*time.Second)
	pol, err := s.out.Get(ctx, &outbound.TrafficSpec{SourceWorkload: "my-app:client-0", Target: &outbound.TrafficSpec_Authority{Authority: "web.my-app.svc.cluster.local:80"}})
	require.NoError(t, err)
	md := pol.GetMetadata().GetResource()
	assert.Equal(t, "Service", md.GetKind())
	assert.Equal(t, uint32(80), md.GetPort())
	detect := pol.GetProtocol().GetDetect()
	require.NotNil(t, detect)
	assert.Equal(t, 10*time.Second, detect.GetTimeout().AsDuration())
	acc := detect.GetHttp1().GetFailureAccrual().GetConsecutiveFailures()
	require.NotNil(t, acc)
	assert.Equal(t, uint32(4), acc.GetMaxFailures())
	assert.Equal(t, 5*time.Second, acc.GetBackoff().GetMinBackoff().AsDuration())
	assert.Equal(t, time.Minute, acc.GetBackoff().GetMaxBackoff().AsDuration())

	routes := detect.GetHttp1().GetRoutes()
	require.Len(t, routes, 1)
	assert.Equal(t, "web-reads", routes[0].GetMetadata().GetResource().GetName())
	rule := routes[0].GetRules()[0]
	assert.Equal(t, "GET", rule.GetMatches()[0].GetMethod().GetRegistered().String())
	assert.Equal(t, "/items", rule.GetMatches()[0].GetPath().GetPrefix())
	assert.Equal(t, 10*time.Second, rule.GetTimeouts().GetRequest().AsDuration(), "the Service's request timeout")
	assert.Equal(t, 2*time.Second, rule.GetTimeouts().GetResponse().AsDuration(), "the route's response timeout")
	retry := rule.GetRetry()
	require.NotNil(t, retry)
	assert.Equal(t, uint32(3), retry.GetMaxRetries())
	assert.Equal(t, uint32(64<<10), retry.GetMaxRequestBytes())
	assert.Equal(t, 400*time.Millisecond, retry.GetTimeout().AsDuration())
	require.Len(t, retry.GetConditions().GetStatusRanges(), 2)
	assert.Equal(t, uint32(502), retry.GetConditions().GetStatusRanges()[0].GetStart())
	assert.Equal(t, uint32(429), retry.GetConditions().GetStatusRanges()[1].GetEnd())
	backends := rule.GetBackends().GetRandomAvailable().GetBackends()
	require.Len(t, backends, 3)
	assert.Equal(t, uint32(90), backends[0].GetWeight())
	assert.Equal(t, "web.my-app.svc.cluster.local:80", backends[0].GetBackend().GetBackend().GetBalancer().GetDiscovery().GetDst().GetPath())
	assert.Equal(t, "web-canary.my-app.svc.cluster.local:80", backends[1].GetBackend().GetBackend().GetBalancer().GetDiscovery().GetDst().GetPath())
	assert.Equal(t, uint32(500), backends[2].GetBackend().GetFilters()[0].GetFailureInjector().GetStatus(), "a missing backend fails requests")

	// The canary Service has no annotations and no routes: one default route.
	pol, err = s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: "web-canary.my-app.svc.cluster.local"}})
	require.NoError(t, err)
	routes = pol.GetProtocol().GetDetect().GetHttp1().GetRoutes()
	require.Len(t, routes, 1)
	assert.Equal(t, "http", routes[0].GetMetadata().GetDefault())
	assert.Nil(t, routes[0].GetRules()[0].GetRetry())
}

func TestOutboundProtocolFollowsAppProtocolAndOpaquePorts(t *testing.T) {
	s := startServers(t, seedDoc(true)+serviceDoc)
	defer s.stop()
	ctx := testutil.Context(t, 10*time.Second)
	get := func(port uint32) *outbound.OutboundPolicy {
		p, err := s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: fmt.Sprintf("web.my-app.svc.cluster.local:%d", port)}})
		require.NoError(t, err)
		return p
	}
	assert.NotNil(t, get(9090).GetProtocol().GetGrpc())
	// One rule with GetProfile (mesh/ports): a Service without an
	// opaque-ports annotation (its own or its namespace's) gets the whole
	// default list, and an appProtocol wins over the list (Linkerd).
	assert.NotNil(t, get(5432).GetProtocol().GetOpaque(), "5432 is a default opaque port")
	assert.NotNil(t, get(3306).GetProtocol().GetHttp1(), "appProtocol http wins over the default opaque 3306")
	assert.NotNil(t, get(7000).GetProtocol().GetOpaque(), "an unknown appProtocol is opaque")
	undefined := get(81)
	assert.Equal(t, "undefined-port", undefined.GetProtocol().GetOpaque().GetRoutes()[0].GetMetadata().GetDefault())

	// By address: the cluster IP is the Service; anything else is forwarded as is.
	ip := func(a [4]byte) *pnet.IPAddress {
		return &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])}}
	}
	p, err := s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{Ip: ip([4]byte{10, 96, 0, 10}), Port: 80}}})
	require.NoError(t, err)
	assert.Equal(t, "web", p.GetMetadata().GetResource().GetName())
	p, err = s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Addr{Addr: &pnet.TcpAddress{Ip: ip([4]byte{192, 0, 2, 1}), Port: 443}}})
	require.NoError(t, err)
	assert.Equal(t, "egress-fallback", p.GetMetadata().GetDefault())
	fwd := p.GetProtocol().GetDetect().GetOpaque().GetRoutes()[0].GetRules()[0].GetBackends().GetFirstAvailable().GetBackends()[0].GetBackend().GetForward()
	assert.Equal(t, uint32(443), fwd.GetAddr().GetPort())

	_, err = s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: "nope.my-app.svc.cluster.local:80"}})
	assert.Equal(t, codes.NotFound, status.Code(err))
	_, err = s.out.Get(ctx, &outbound.TrafficSpec{})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = s.out.Get(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: "web.my-app.svc.cluster.local:99999"}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
}

func TestOutboundWatchFollowsAnnotationChanges(t *testing.T) {
	s := startServers(t, seedDoc(true)+serviceDoc)
	defer s.stop()
	ctx := testutil.Context(t, 10*time.Second)
	st, err := s.out.Watch(ctx, &outbound.TrafficSpec{Target: &outbound.TrafficSpec_Authority{Authority: "web-canary.my-app.svc.cluster.local:80"}})
	require.NoError(t, err)
	first, err := st.Recv()
	require.NoError(t, err)
	assert.Nil(t, first.GetProtocol().GetDetect().GetHttp1().GetFailureAccrual())
	s.src.Set(objectsFrom(t, seedDoc(true)+`---
apiVersion: v1
kind: Service
metadata:
  name: web-canary
  namespace: my-app
  annotations: {balancer.linkerd.io/failure-accrual: consecutive}
spec:
  selector: {app: web-canary}
  ports: [{name: http, port: 80}]
`))
	next, err := st.Recv()
	require.NoError(t, err)
	assert.Equal(t, uint32(7), next.GetProtocol().GetDetect().GetHttp1().GetFailureAccrual().GetConsecutiveFailures().GetMaxFailures())
}

func TestInvalidOutboundAnnotationsAreWarnings(t *testing.T) {
	ix := policy.Build(objectsFrom(t, seedDoc(false)+`---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: my-app
  annotations:
    retry.linkerd.io/http: 5xx,teapot
    retry.linkerd.io/limit: lots
    timeout.linkerd.io/request: 10 seconds
    balancer.linkerd.io/failure-accrual: random
spec:
  ports: [{port: 80}]
`), nil)
	text := problemsText(ix)
	for _, want := range []string{
		`metadata.annotations.retry.linkerd.io/http: invalid retry condition "teapot"`,
		`metadata.annotations.retry.linkerd.io/limit: "lots" is not a number`,
		`metadata.annotations.timeout.linkerd.io/request: "10 seconds"`,
		`unsupported failure accrual mode "random"`,
	} {
		assert.Contains(t, text, want)
	}
}

// TestNewIndexersContextBoundsTheStartOnly: NewIndexer fails with the
// error of a context that has already ended; the index follows its source
// for the context given to Run, not the one NewIndexer was given.
func TestNewIndexersContextBoundsTheStartOnly(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := policy.NewIndexer(ended, policy.NewMemorySource(&policy.Objects{}))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "policy: ")
}
