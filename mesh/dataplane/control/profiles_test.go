package control_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	spv1alpha2 "github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/discovery"
	dclient "github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/local"
)

// withAPIProfile adds a ServiceProfile for api with one retryable route.
func withAPIProfile(objs []runtime.Object) []runtime.Object {
	sp := &spv1alpha2.ServiceProfile{
		TypeMeta:   metav1.TypeMeta{APIVersion: "linkerd.io/v1alpha2", Kind: "ServiceProfile"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api.shop.svc.cluster.local"},
		Spec: spv1alpha2.ServiceProfileSpec{Routes: []spv1alpha2.RouteSpec{{
			Name:        "GET /items",
			Condition:   &spv1alpha2.RequestMatch{Method: "GET", PathRegex: "/items"},
			IsRetryable: true,
			Timeout:     "300ms",
		}}},
	}
	return append(append([]runtime.Object{}, objs...), sp)
}

func profiles(t *testing.T, conn grpc.ClientConnInterface, opts ...dclient.Option) *control.Profiles {
	t.Helper()
	dc, err := dclient.New(testContext(t), conn, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dc.Close() })
	pr, err := control.NewProfiles(dc)
	require.NoError(t, err)
	return pr
}

// untilProfile reads profiles from ch until ok holds.
func untilProfile(t *testing.T, ch <-chan *pdst.DestinationProfile, ok func(*pdst.DestinationProfile) bool, what string) *pdst.DestinationProfile {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p, open := <-ch:
			require.True(t, open, "channel closed waiting for %s", what)
			if ok(p) {
				return p
			}
		case <-deadline:
			t.Fatalf("no %s within 10s", what)
		}
	}
}

func hasRoutes(p *pdst.DestinationProfile) bool { return len(p.GetRoutes()) > 0 }

func TestProfilesDeliverAServiceProfileAndFollowItsChanges(t *testing.T) {
	p := plan(t, meshYAML)
	idx, conn := destination(t, p.Objects)
	pr := profiles(t, conn)
	ctx := testContext(t)

	ch, err := pr.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	first := next(t, ch)
	require.NotNil(t, first)
	assert.Equal(t, "api.shop.svc.cluster.local", first.GetFullyQualifiedName())
	assert.Equal(t, "api", first.GetParentRef().GetResource().GetName())
	assert.Empty(t, first.GetRoutes(), "no ServiceProfile yet: the default profile")

	require.NoError(t, idx.Replace(withAPIProfile(discoveryObjects(p.Objects))))
	got := untilProfile(t, ch, hasRoutes, "the ServiceProfile's routes")
	require.Len(t, got.GetRoutes(), 1)
	r := got.GetRoutes()[0]
	assert.True(t, r.GetIsRetryable())
	assert.Equal(t, 300*time.Millisecond, r.GetTimeout().AsDuration())
	assert.Equal(t, "GET /items", r.GetMetricsLabels()["route"])
	assert.Equal(t, "api.shop.svc.cluster.local", got.GetProfileRef().GetResource().GetName())
}

func TestProfilesReportUnknownAndForeignNamesAsNotFound(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := destination(t, p.Objects)
	pr := profiles(t, conn)
	ctx := testContext(t)

	_, err := pr.Watch(ctx, local.Authority("shop", "nothere", 80))
	assert.ErrorIs(t, err, dataplane.ErrNotFound, "a Service that does not exist")
	_, err = pr.Watch(ctx, "example.com:80")
	assert.ErrorIs(t, err, dataplane.ErrNotFound, "a name outside the cluster domain")
	assert.ErrorContains(t, err, "example.com")

	// A pod address is a single known endpoint: it has a profile.
	ch, err := pr.Watch(ctx, "127.0.9.1:8080")
	require.NoError(t, err)
	assert.NotNil(t, next(t, ch).GetEndpoint())

	_, err = control.NewProfiles(nil)
	assert.Error(t, err)
}

func TestProfilesCloseTheChannelWhenTheContextEnds(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := destination(t, p.Objects)
	pr := profiles(t, conn)
	ctx, cancel := context.WithCancel(testContext(t))
	ch, err := pr.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	require.NotNil(t, next(t, ch))
	cancel()
	closed(t, ch)
}

func TestProfilesKeepTheLastProfileAndRecoverWhenTheStreamBreaks(t *testing.T) {
	p := plan(t, meshYAML)
	idx, err := discovery.NewIndex(discovery.WithControlPlaneNamespace("weft"))
	require.NoError(t, err)
	defer idx.Close()
	require.NoError(t, idx.Replace(discoveryObjects(p.Objects)))
	start := func(l net.Listener) *grpc.Server {
		srv, err := discovery.NewServer(idx)
		require.NoError(t, err)
		s := grpc.NewServer()
		srv.Register(s)
		go func() { _ = s.Serve(l) }()
		return s
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	s1 := start(lis)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	pr := profiles(t, conn, dclient.WithBackoff(20*time.Millisecond, 200*time.Millisecond))
	ctx := testContext(t)
	ch, err := pr.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	first := next(t, ch)

	s1.Stop() // the control plane goes away
	select {
	case v, ok := <-ch:
		require.True(t, ok, "the channel closed when the stream broke")
		assert.Equal(t, first.String(), v.String(), "only the last profile may be re-sent")
	case <-time.After(300 * time.Millisecond):
	}

	// While it is away a ServiceProfile appears; the restarted server's
	// profile arrives on the same channel.
	require.NoError(t, idx.Replace(withAPIProfile(discoveryObjects(p.Objects))))
	lis2, err := net.Listen("tcp", addr)
	require.NoError(t, err, "could not take the old port back")
	s2 := start(lis2)
	defer s2.Stop()
	untilProfile(t, ch, hasRoutes, "the restarted server's profile")
}
