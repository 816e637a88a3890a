package discoverytest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "github.com/weftmesh/weft/apis/proxy/destination"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/discovery"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Harness drives one source under the shared behaviour suite.
type Harness interface {
	// Index is the index the source feeds.
	Index() *discovery.Index
	// Apply creates or updates objects through the source's own path (the
	// API server, files on disk) and returns once the index holds them.
	Apply(t testing.TB, objs ...runtime.Object)
	// Delete deletes objects through the source's own path and returns
	// once the index no longer holds them.
	Delete(t testing.TB, objs ...runtime.Object)
}

// NewHarness builds a fresh harness (and source) for one test; opts
// configure its index.
type NewHarness func(t *testing.T, opts ...discovery.Option) Harness

const (
	ns     = "shop"
	webFQN = "web.shop.svc.cluster.local"
	web    = webFQN + ":80"
)

func webService() *corev1.Service {
	return Service(ns, "web", "10.96.0.10", ServicePort{Name: "http", Port: 80, TargetPort: 8080})
}

func webPod(name, ip string, opts ...PodOption) *corev1.Pod {
	return Pod(ns, name, ip, "web", append([]PodOption{Meshed("weft", 0), OwnedByDeployment("web", "5d8f")}, opts...)...)
}

var httpPort = []SlicePort{{Name: "http", Port: 8080}}

// RunSuite runs the behaviour every discovery source must show, through a
// real Destination server and gRPC client, against the source newHarness
// builds. The kubernetes and static sources both run it.
func RunSuite(t *testing.T, newHarness NewHarness) {
	t.Run("UnknownServiceGetsNoEndpointsThatDoNotExist", func(t *testing.T) {
		h := newHarness(t)
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		m := s.Next(t)
		require.NotNil(t, m.GetNoEndpoints(), "first message: %v", m)
		assert.False(t, m.GetNoEndpoints().GetExists())
	})

	t.Run("UnknownNamespaceGetsNoEndpointsThatDoNotExist", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService())
		conn := Serve(t, h.Index())
		m := Get(t, conn, "web.nowhere.svc.cluster.local:80", "").Next(t)
		require.NotNil(t, m.GetNoEndpoints(), "first message: %v", m)
		assert.False(t, m.GetNoEndpoints().GetExists())
	})

	t.Run("ServiceWithoutEndpointsGetsNoEndpointsThatExist", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService())
		conn := Serve(t, h.Index())
		m := Get(t, conn, web, "").Next(t)
		require.NotNil(t, m.GetNoEndpoints(), "first message: %v", m)
		assert.True(t, m.GetNoEndpoints().GetExists())
	})

	t.Run("SnapshotComesFirstThenAddAndRemoveDeltas", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"), webPod("web-2", "10.0.0.2"), webPod("web-3", "10.0.0.3"),
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1"), Endpoint("10.0.0.2", "web-2")))
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		first := s.Next(t)
		require.NotNil(t, first.GetAdd(), "first message: %v", first)
		assert.Len(t, first.GetAdd().GetAddrs(), 2)
		assert.Equal(t, map[string]string{"namespace": ns, "service": "web"}, first.GetAdd().GetMetricLabels())

		h.Apply(t, EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1"), Endpoint("10.0.0.2", "web-2"), Endpoint("10.0.0.3", "web-3")))
		add := s.Next(t)
		require.NotNil(t, add.GetAdd(), "second message: %v", add)
		require.Len(t, add.GetAdd().GetAddrs(), 1, "only the new endpoint is added")
		ep, err := discovery.EndpointFromProto(add.GetAdd().GetAddrs()[0])
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.3:8080", ep.Addr.String())

		h.Apply(t, EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.2", "web-2"), Endpoint("10.0.0.3", "web-3")))
		rm := s.Next(t)
		require.NotNil(t, rm.GetRemove(), "third message: %v", rm)
		require.Len(t, rm.GetRemove().GetAddrs(), 1)
		gone, err := discovery.TCPAddressFromProto(rm.GetRemove().GetAddrs()[0])
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.1:8080", gone.String())
		assert.Len(t, s.State().Endpoints, 2)
	})

	t.Run("MeshedPodEndpointCarriesIdentityHintAndLabels", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"),
			Pod(ns, "legacy-1", "10.0.0.9", "legacy"),
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1", Zone("zone-a")), Endpoint("10.0.0.9", "legacy-1")))
		conn := Serve(t, h.Index())
		st := Get(t, conn, web, "").WaitFor(t, "two endpoints", func(s State) bool { return len(s.Endpoints) == 2 })
		meshed, _ := st.Get("10.0.0.1:8080")
		assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", meshed.Identity)
		assert.Equal(t, discovery.HintH2, meshed.Hint)
		assert.Equal(t, uint32(10000), meshed.Weight)
		assert.Equal(t, map[string]string{"pod": "web-1", "serviceaccount": "web", "deployment": "web", "zone": "zone-a"}, meshed.MetricLabels)
		plain, _ := st.Get("10.0.0.9:8080")
		assert.Empty(t, plain.Identity, "an unmeshed pod has no identity")
		assert.Equal(t, discovery.HintUnknown, plain.Hint)
	})

	t.Run("OpaquePortsFromPodOrNamespaceGiveOpaqueTransport", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns, "config.linkerd.io/opaque-ports", "4000-4100"),
			Service(ns, "db", "10.96.0.20", ServicePort{Name: "sql", Port: 3306, TargetPort: 3306}),
			Service(ns, "queue", "10.96.0.21", ServicePort{Name: "amqp", Port: 4050, TargetPort: 4050}),
			Pod(ns, "db-1", "10.0.1.1", "db", Meshed("weft", 4143), Annotations("config.linkerd.io/opaque-ports", "mysql"), ContainerPort("mysql", 3306)),
			Pod(ns, "queue-1", "10.0.1.2", "queue", Meshed("weft", 0)),
			EndpointSlice(ns, "db-a", "db", []SlicePort{{Name: "sql", Port: 3306}}, Endpoint("10.0.1.1", "db-1")),
			EndpointSlice(ns, "queue-a", "queue", []SlicePort{{Name: "amqp", Port: 4050}}, Endpoint("10.0.1.2", "queue-1")))
		conn := Serve(t, h.Index())
		db := Get(t, conn, "db.shop.svc.cluster.local:3306", "").WaitFor(t, "db endpoint", func(s State) bool { return s.Has("10.0.1.1:3306") })
		e, _ := db.Get("10.0.1.1:3306")
		assert.Equal(t, discovery.HintOpaque, e.Hint)
		assert.Equal(t, uint32(4143), e.OpaqueTransportPort)
		assert.NotEmpty(t, e.Identity)
		q := Get(t, conn, "queue.shop.svc.cluster.local:4050", "").WaitFor(t, "queue endpoint", func(s State) bool { return s.Has("10.0.1.2:4050") })
		e, _ = q.Get("10.0.1.2:4050")
		assert.Equal(t, discovery.HintOpaque, e.Hint, "namespace range 4000-4100 covers 4050")
		assert.Equal(t, uint32(4143), e.OpaqueTransportPort)
	})

	t.Run("EndpointConditionsAreHonoured", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"), webPod("web-2", "10.0.0.2"), webPod("web-3", "10.0.0.3"),
			EndpointSlice(ns, "web-a", "web", httpPort,
				Endpoint("10.0.0.1", "web-1"),
				Endpoint("10.0.0.2", "web-2", NotReady()),
				Endpoint("10.0.0.3", "web-3", Terminating(true))))
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		st := s.WaitFor(t, "the ready endpoint", func(s State) bool { return s.Has("10.0.0.1:8080") })
		assert.Len(t, st.Endpoints, 1, "not-ready and terminating endpoints are left out while a ready one exists")

		// The ready pod goes: the terminating one that still serves takes over.
		h.Apply(t, EndpointSlice(ns, "web-a", "web", httpPort,
			Endpoint("10.0.0.1", "web-1", Terminating(false)),
			Endpoint("10.0.0.2", "web-2", NotReady()),
			Endpoint("10.0.0.3", "web-3", Terminating(true))))
		st = s.WaitFor(t, "fallback to serving terminating endpoint", func(s State) bool { return len(s.Endpoints) == 1 && s.Has("10.0.0.3:8080") })
		assert.True(t, st.Exists)
	})

	t.Run("DuplicateAddressAcrossSlicesAppearsOnce", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"), webPod("web-2", "10.0.0.2"),
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1"), Endpoint("10.0.0.2", "web-2")),
			EndpointSlice(ns, "web-b", "web", httpPort, Endpoint("10.0.0.1", "web-1")))
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		first := s.Next(t)
		require.NotNil(t, first.GetAdd())
		assert.Len(t, first.GetAdd().GetAddrs(), 2, "10.0.0.1 is listed by both slices but sent once")

		h.Delete(t, EndpointSlice(ns, "web-b", "web", httpPort))
		s.Quiet(t, 300*time.Millisecond)
		assert.True(t, s.State().Has("10.0.0.1:8080"), "still listed by web-a")

		h.Delete(t, EndpointSlice(ns, "web-a", "web", httpPort))
		st := s.WaitFor(t, "no endpoints", func(s State) bool { return len(s.Endpoints) == 0 })
		assert.True(t, st.Exists, "the service still exists")
	})

	t.Run("PodDeletedWhileSubscribedIsRemoved", func(t *testing.T) {
		h := newHarness(t)
		p2 := webPod("web-2", "10.0.0.2")
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"), p2,
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1"), Endpoint("10.0.0.2", "web-2")))
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		s.WaitFor(t, "two endpoints", func(s State) bool { return len(s.Endpoints) == 2 })
		h.Delete(t, p2)
		rm := s.Next(t)
		require.NotNil(t, rm.GetRemove(), "message after the pod's deletion: %v", rm)
		assert.False(t, s.State().Has("10.0.0.2:8080"))
		assert.True(t, s.State().Has("10.0.0.1:8080"))
	})

	t.Run("ServiceDeletedWhileSubscribedNoLongerExists", func(t *testing.T) {
		h := newHarness(t)
		svc := webService()
		h.Apply(t, Namespace(ns), svc, webPod("web-1", "10.0.0.1"),
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1")))
		conn := Serve(t, h.Index())
		s := Get(t, conn, web, "")
		s.WaitFor(t, "one endpoint", func(s State) bool { return len(s.Endpoints) == 1 })
		h.Delete(t, svc)
		m := s.Next(t)
		require.NotNil(t, m.GetNoEndpoints(), "message after the service's deletion: %v", m)
		assert.False(t, m.GetNoEndpoints().GetExists())
	})

	t.Run("PodIPResolvesToThatPodAndClusterIPToTheService", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1"), webPod("web-2", "10.0.0.2"),
			EndpointSlice(ns, "web-a", "web", httpPort, Endpoint("10.0.0.1", "web-1"), Endpoint("10.0.0.2", "web-2")))
		conn := Serve(t, h.Index())
		pod := Get(t, conn, "10.0.0.2:8080", "").WaitFor(t, "the pod", func(s State) bool { return s.Messages > 0 })
		require.Len(t, pod.Endpoints, 1)
		e, ok := pod.Get("10.0.0.2:8080")
		require.True(t, ok)
		assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", e.Identity)
		assert.Equal(t, "web-2", e.MetricLabels["pod"])

		svc := Get(t, conn, "10.96.0.10:80", "").WaitFor(t, "the service", func(s State) bool { return len(s.Endpoints) == 2 })
		assert.True(t, svc.Has("10.0.0.1:8080"))

		unknown := Get(t, conn, "10.9.9.9:80", "").Next(t)
		require.NotNil(t, unknown.GetNoEndpoints())
		assert.False(t, unknown.GetNoEndpoints().GetExists())
	})

	t.Run("HostnameResolvesToOneEndpoint", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), Service(ns, "db", "None", ServicePort{Name: "sql", Port: 5432, TargetPort: 5432}),
			Pod(ns, "db-0", "10.0.2.1", "db"), Pod(ns, "db-1", "10.0.2.2", "db"),
			EndpointSlice(ns, "db-a", "db", []SlicePort{{Name: "sql", Port: 5432}},
				Endpoint("10.0.2.1", "db-0", Hostname("db-0")), Endpoint("10.0.2.2", "db-1", Hostname("db-1"))))
		conn := Serve(t, h.Index())
		st := Get(t, conn, "db-1.db.shop.svc.cluster.local:5432", "").WaitFor(t, "db-1", func(s State) bool { return len(s.Endpoints) > 0 })
		assert.Len(t, st.Endpoints, 1)
		assert.True(t, st.Has("10.0.2.2:5432"))
	})

	t.Run("MalformedPathsAreInvalidArgument", func(t *testing.T) {
		h := newHarness(t)
		conn := Serve(t, h.Index())
		for _, path := range []string{"", "web.shop.svc.cluster.local:0", "web.shop.svc.cluster.local:65536", "web.shop.svc.cluster.local:http",
			"web.shop.svc.example.org:80", "web:80", "a.b.c.d.shop.svc.cluster.local:80", "fd00::1:80", "[fd00::1%eth0]:80",
			"WEB_1.shop.svc.cluster.local:80", strings.Repeat("a", 300) + ".shop.svc.cluster.local:80"} {
			err := Get(t, conn, path, "").Err(t)
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "Get %q: %v", path, err)
			err = GetProfile(t, conn, path, "").Err(t)
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "GetProfile %q: %v", path, err)
		}
	})

	t.Run("BadContextTokenIsTolerated", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService())
		conn := Serve(t, h.Index())
		for _, tok := range []string{"{not json", `{"ns": 7}`, "garbage", strings.Repeat("x", 10000)} {
			m := Get(t, conn, web, tok).Next(t)
			assert.True(t, m.GetNoEndpoints().GetExists(), "token %.20q", tok)
			p := GetProfile(t, conn, web, tok).Next(t)
			assert.Equal(t, webFQN, p.GetFullyQualifiedName(), "token %.20q", tok)
		}
	})

	t.Run("GetProfileSendsDefaultThenServiceProfileUpdates", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService())
		conn := Serve(t, h.Index())
		s := GetProfile(t, conn, web, "")
		p := s.Next(t)
		assert.Equal(t, webFQN, p.GetFullyQualifiedName())
		assert.Empty(t, p.GetRoutes())
		assert.InDelta(t, 0.2, p.GetRetryBudget().GetRetryRatio(), 1e-6)
		assert.Equal(t, uint32(10), p.GetRetryBudget().GetMinRetriesPerSecond())
		assert.Equal(t, 10*time.Second, p.GetRetryBudget().GetTtl().AsDuration())
		assert.False(t, p.GetOpaqueProtocol())

		sp := ServiceProfile(ns, webFQN, Route("list", "GET", "/books"), Route("create", "POST", "/books"))
		sp.Spec.Routes[0].Timeout = "300ms"
		sp.Spec.Routes[0].IsRetryable = true
		sp.Spec.Routes[0].ResponseClasses = []spv1alpha2.ResponseClass{{Condition: &spv1alpha2.ResponseMatch{Status: &spv1alpha2.Range{Min: 500, Max: 599}}, IsFailure: true}}
		sp.Spec.RetryBudget = &spv1alpha2.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 3, TTL: "20s"}
		h.Apply(t, sp)
		p = s.WaitFor(t, "the ServiceProfile's routes", func(p *pb.DestinationProfile) bool { return len(p.GetRoutes()) == 2 })
		r := p.GetRoutes()[0]
		assert.Equal(t, "list", r.GetMetricsLabels()["route"])
		assert.True(t, r.GetIsRetryable())
		assert.Equal(t, 300*time.Millisecond, r.GetTimeout().AsDuration())
		require.NotNil(t, r.GetCondition().GetAll(), "method and path combine into all")
		assert.Len(t, r.GetCondition().GetAll().GetMatches(), 2)
		require.Len(t, r.GetResponseClasses(), 1)
		assert.True(t, r.GetResponseClasses()[0].GetIsFailure())
		assert.Equal(t, uint32(500), r.GetResponseClasses()[0].GetCondition().GetStatus().GetMin())
		assert.InDelta(t, 0.5, p.GetRetryBudget().GetRetryRatio(), 1e-6)
		assert.Equal(t, 20*time.Second, p.GetRetryBudget().GetTtl().AsDuration())

		h.Delete(t, sp)
		s.WaitFor(t, "the default profile again", func(p *pb.DestinationProfile) bool { return len(p.GetRoutes()) == 0 })
	})

	t.Run("ClientNamespaceServiceProfileWinsWithContextToken", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), Namespace("client"), webService(),
			ServiceProfile(ns, webFQN, Route("server-side", "GET", "/")),
			ServiceProfile("client", webFQN, Route("client-side", "GET", "/")))
		conn := Serve(t, h.Index())
		p := GetProfile(t, conn, web, `{"ns":"client","nodeName":"node-1","pod":"client-1"}`).Next(t)
		require.Len(t, p.GetRoutes(), 1)
		assert.Equal(t, "client-side", p.GetRoutes()[0].GetMetricsLabels()["route"])
		p = GetProfile(t, conn, web, "").Next(t)
		require.Len(t, p.GetRoutes(), 1)
		assert.Equal(t, "server-side", p.GetRoutes()[0].GetMetricsLabels()["route"])
	})

	t.Run("GetProfileForPodIPCarriesTheEndpoint", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), webService(), webPod("web-1", "10.0.0.1", Annotations("config.linkerd.io/opaque-ports", "9000")))
		conn := Serve(t, h.Index())
		p := GetProfile(t, conn, "10.0.0.1:9000", "").Next(t)
		require.NotNil(t, p.GetEndpoint())
		e, err := discovery.EndpointFromProto(p.GetEndpoint())
		require.NoError(t, err)
		assert.Equal(t, "10.0.0.1:9000", e.Addr.String())
		assert.Equal(t, "web.shop.serviceaccount.identity.weft.cluster.local", e.Identity)
		assert.True(t, p.GetOpaqueProtocol())
		assert.Empty(t, p.GetFullyQualifiedName())

		p = GetProfile(t, conn, "10.96.0.10:80", "").Next(t)
		assert.Equal(t, webFQN, p.GetFullyQualifiedName(), "a cluster IP resolves to its service's profile")
		assert.Nil(t, p.GetEndpoint())
	})

	t.Run("ServiceOpaquePortsAnnotationMakesProfileOpaque", func(t *testing.T) {
		h := newHarness(t)
		h.Apply(t, Namespace(ns), ServiceWithAnnotations(webService(), "config.linkerd.io/opaque-ports", "80"))
		conn := Serve(t, h.Index())
		p := GetProfile(t, conn, web, "").Next(t)
		assert.True(t, p.GetOpaqueProtocol())
		p = GetProfile(t, conn, "db.shop.svc.cluster.local:3306", "").Next(t)
		assert.True(t, p.GetOpaqueProtocol(), "3306 is opaque by default, even for unknown services")
	})
}
