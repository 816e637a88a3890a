package control_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/local"
	"github.com/weftmesh/weft/mesh/policy"
)

// opaqueAPI returns the objects of meshYAML with the api Service's port
// 8080 declared opaque by its appProtocol.
func opaqueAPI(t *testing.T) []runtime.Object {
	t.Helper()
	var out []runtime.Object
	found := false
	for _, o := range plan(t, meshYAML).Objects {
		if svc, ok := o.(*corev1.Service); ok && svc.Namespace == "shop" && svc.Name == "api" {
			svc = svc.DeepCopy()
			for i := range svc.Spec.Ports {
				if svc.Spec.Ports[i].Port == 8080 {
					svc.Spec.Ports[i].AppProtocol = ptr.To("linkerd.io/opaque")
					found = true
				}
			}
			o = svc
		}
		out = append(out, o)
	}
	require.True(t, found, "no api Service with port 8080 in the plan")
	return out
}

func policyObjects(t *testing.T, objs []runtime.Object) *policy.Objects {
	t.Helper()
	o := &policy.Objects{}
	for _, obj := range objs {
		require.NoError(t, o.Add(obj, policy.Location{}))
	}
	return o
}

// outboundIndexer runs a policy indexer over a memory source of objs.
func outboundIndexer(t *testing.T, objs []runtime.Object) (*policy.MemorySource, *policy.Indexer) {
	t.Helper()
	src := policy.NewMemorySource(policyObjects(t, objs))
	ctx := testContext(t)
	x, err := policy.NewIndexer(ctx, src, policy.WithControlPlaneNamespace("weft"))
	require.NoError(t, err)
	go func() { _ = x.Run(ctx) }()
	return src, x
}

func startOutbound(t *testing.T, x *policy.Indexer, lis net.Listener) *grpc.Server {
	t.Helper()
	out, err := policy.NewOutboundServer(x)
	require.NoError(t, err)
	s := grpc.NewServer()
	out.Register(s)
	go func() { _ = s.Serve(lis) }()
	return s
}

func outboundServer(t *testing.T, objs []runtime.Object) (*policy.MemorySource, *grpc.ClientConn) {
	t.Helper()
	src, x := outboundIndexer(t, objs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := startOutbound(t, x, lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return src, conn
}

func serviceOf(p *outbound.OutboundPolicy) string {
	r := p.GetMetadata().GetResource()
	return r.GetKind() + " " + r.GetNamespace() + "/" + r.GetName()
}

func TestOutboundPoliciesDeliverAServicePolicyAndFollowItsChanges(t *testing.T) {
	p := plan(t, meshYAML)
	src, conn := outboundServer(t, p.Objects)
	ctx := testContext(t)
	op, err := control.NewOutboundPolicies(conn, control.Workload("shop", "web-0"))
	require.NoError(t, err)

	ch, err := op.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	first := next(t, ch)
	require.NotNil(t, first)
	assert.Equal(t, "Service shop/api", serviceOf(first))
	assert.Equal(t, uint32(8080), first.GetMetadata().GetResource().GetPort())
	require.NotNil(t, first.GetProtocol().GetDetect(), "an unannotated port is detected: %v", first.GetProtocol())

	// Declare the port opaque: the policy's protocol follows.
	src.Set(policyObjects(t, opaqueAPI(t)))
	deadline := time.After(10 * time.Second)
	for {
		select {
		case pol, ok := <-ch:
			require.True(t, ok, "channel closed waiting for the opaque policy")
			if pol.GetProtocol().GetOpaque() != nil {
				assert.Equal(t, "Service shop/api", serviceOf(pol))
				return
			}
		case <-deadline:
			t.Fatal("no opaque policy within 10s")
		}
	}
}

func TestOutboundPoliciesSendAnAddressAsAnAddressTarget(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := outboundServer(t, p.Objects)
	ctx := testContext(t)
	op, err := control.NewOutboundPolicies(conn, control.Workload("shop", "web-0"))
	require.NoError(t, err)

	// An address that is no Service's cluster IP gets the fallback policy
	// that forwards to it as it is.
	ch, err := op.Watch(ctx, "127.0.9.1:8080")
	require.NoError(t, err)
	pol := next(t, ch)
	require.NotNil(t, pol)
	assert.NotEqual(t, "Service shop/api", serviceOf(pol))

	spec, err := control.TrafficSpec("w", "[fd00::1]:80")
	require.NoError(t, err)
	ip := spec.GetAddr().GetIp().GetIpv6()
	assert.Equal(t, uint64(0xfd00<<48), ip.GetFirst())
	assert.Equal(t, uint64(1), ip.GetLast())
	spec, err = control.TrafficSpec("w", "10.1.2.3:80")
	require.NoError(t, err)
	assert.Equal(t, uint32(0x0a010203), spec.GetAddr().GetIp().GetIpv4())
	assert.Equal(t, uint32(80), spec.GetAddr().GetPort())
	spec, err = control.TrafficSpec("w", "api.shop.svc.cluster.local:80")
	require.NoError(t, err)
	assert.Equal(t, "api.shop.svc.cluster.local:80", spec.GetAuthority())
}

func TestOutboundPoliciesReportAnUnknownServiceAsNotFound(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := outboundServer(t, p.Objects)
	ctx := testContext(t)
	op, err := control.NewOutboundPolicies(conn, control.Workload("shop", "web-0"))
	require.NoError(t, err)

	_, err = op.Watch(ctx, local.Authority("shop", "nothere", 80))
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
	assert.ErrorContains(t, err, "nothere")

	// A malformed request is an error, but not NotFound.
	for _, bad := range []string{"", "10.0.0.1:0"} {
		_, err = op.Watch(ctx, bad)
		require.Error(t, err, "target %q", bad)
		assert.NotErrorIs(t, err, dataplane.ErrNotFound, "target %q", bad)
	}
	badWorkload, err := control.NewOutboundPolicies(conn, "not a workload")
	require.NoError(t, err)
	_, err = badWorkload.Watch(ctx, local.Authority("shop", "api", 8080))
	require.Error(t, err)
	assert.NotErrorIs(t, err, dataplane.ErrNotFound)

	_, err = control.NewOutboundPolicies(nil, "w")
	assert.Error(t, err)
	_, err = control.NewOutboundPolicies(conn, "")
	assert.Error(t, err)
	_, err = control.NewOutboundPolicies(conn, "w", control.WithOutboundBackoff(time.Second, time.Millisecond))
	assert.Error(t, err)
}

func TestOutboundPoliciesCloseTheChannelWhenTheContextEnds(t *testing.T) {
	p := plan(t, meshYAML)
	_, conn := outboundServer(t, p.Objects)
	op, err := control.NewOutboundPolicies(conn, control.Workload("shop", "web-0"))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(testContext(t))
	ch, err := op.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	require.NotNil(t, next(t, ch))
	cancel()
	closed(t, ch)
}

// closed waits for ch to be closed, draining what is left.
func closed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel still open 10s after the context ended")
		}
	}
}

func TestOutboundPoliciesKeepTheLastPolicyAndReconnectWhenTheStreamBreaks(t *testing.T) {
	p := plan(t, meshYAML)
	src, x := outboundIndexer(t, p.Objects)
	ctx := testContext(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	s1 := startOutbound(t, x, lis)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	op, err := control.NewOutboundPolicies(conn, control.Workload("shop", "web-0"), control.WithOutboundBackoff(20*time.Millisecond, 200*time.Millisecond))
	require.NoError(t, err)
	ch, err := op.Watch(ctx, local.Authority("shop", "api", 8080))
	require.NoError(t, err)
	first := next(t, ch)
	require.NotNil(t, first.GetProtocol().GetDetect())

	s1.Stop() // the control plane goes away
	select {
	case v, ok := <-ch:
		require.True(t, ok, "the channel closed when the stream broke")
		assert.Equal(t, first.String(), v.String(), "only the last policy may be re-sent")
	case <-time.After(300 * time.Millisecond):
	}

	// While it is away the port turns opaque; the restarted server's
	// policy arrives on the same channel.
	src.Set(policyObjects(t, opaqueAPI(t)))
	lis2, err := net.Listen("tcp", addr)
	require.NoError(t, err, "could not take the old port back")
	s2 := startOutbound(t, x, lis2)
	defer s2.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case pol, ok := <-ch:
			require.True(t, ok, "channel closed while reconnecting")
			if pol.GetProtocol().GetOpaque() != nil {
				return
			}
		case <-deadline:
			t.Fatal("no policy from the restarted server within 10s")
		}
	}
}

func TestTrafficSpecRejectsEmptyAndZonedTargets(t *testing.T) {
	for _, bad := range []string{"", "[fe80::1%eth0]:80", "127.0.0.1:0"} {
		_, err := control.TrafficSpec("w", bad)
		assert.Error(t, err, "target %q", bad)
	}
	spec, err := control.TrafficSpec("w", netip.MustParseAddrPort("[::ffff:10.0.0.1]:80").String())
	require.NoError(t, err)
	assert.Equal(t, uint32(0x0a000001), spec.GetAddr().GetIp().GetIpv4(), "a mapped IPv4 address is sent as IPv4")
}
