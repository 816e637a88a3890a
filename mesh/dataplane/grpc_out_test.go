package dataplane_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/grpcoracle"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The client proxy's frame path (outbound gRPC calls at frame level):
// what the differential oracle (grpc_frames_test.go) does not reach.

// onBothOutboundPaths runs a test of gRPC calls through a client proxy
// on each of its paths for them, given the client proxy's options: the
// frame path (which must serve the test's calls, frames of them) and the
// http.Handler path.
func onBothOutboundPaths(t *testing.T, frames int64, test func(t *testing.T, clientOpts ...dataplane.Option)) {
	t.Run("frame path", func(t *testing.T) {
		var n atomic.Int64
		test(t, dataplane.WithGRPCOutFrameCountForTest(&n))
		assert.Equal(t, frames, n.Load(), "the calls the frame path served")
	})
	t.Run("http path", func(t *testing.T) { test(t, dataplane.WithoutGRPCFramesForTest()) })
}

// bodyHealth fails the first calls it is told to with UNAVAILABLE and
// records the service each call asked about (its request message, so
// the request body each attempt carried).
type bodyHealth struct {
	healthpb.UnimplementedHealthServer
	fail int
	mu   sync.Mutex
	got  []string
}

func (s *bodyHealth) Check(_ context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.mu.Lock()
	s.got = append(s.got, req.GetService())
	n := len(s.got)
	s.mu.Unlock()
	if n <= s.fail {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *bodyHealth) services() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// A call whose GRPCRoute retries UNAVAILABLE is retried with the same
// request body (the kept bytes, replayed) on either path; one whose body
// is larger than the route's replay limit is not, and gets the first
// answer.
func TestARetriedGRPCCallIsReplayedWithItsBodyOnEitherPath(t *testing.T) {
	const target = "retry.shop.svc.cluster.local:80"
	policy := func(maxBytes uint32) *outbound.OutboundPolicy {
		return grpcPolicy(nil, &outbound.GrpcRoute_Rule{Retry: &outbound.GrpcRoute_Retry{
			MaxRetries:      2,
			MaxRequestBytes: maxBytes,
			Conditions:      &outbound.GrpcRoute_Retry_Conditions{Unavailable: true},
			Backoff:         &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Millisecond), MaxBackoff: durationpb.New(time.Millisecond)},
		}})
	}
	service := strings.Repeat("s", 3000) // a body of a few KiB
	onBothOutboundPaths(t, 2, func(t *testing.T, opts ...dataplane.Option) {
		app := &bodyHealth{fail: 2}
		o := startOutboundOnly(t, target, opts...)
		o.resolver.Set(target, startHealthApp(t, app))
		o.outbound.Set(target, policy(64<<10))
		_, err := healthClient(t, o).Check(testutil.Context(t, 10*time.Second), &healthpb.HealthCheckRequest{Service: service})
		require.NoError(t, err, "the third attempt succeeds")
		assert.Equal(t, []string{service, service, service}, app.services(), "every attempt carried the whole body")
		assert.Equal(t, 2.0, o.r.metric(t, "outbound_http_retries_total", `reason="status"`))

		// Over the replay limit: one attempt, its answer relayed.
		small := &bodyHealth{fail: 1}
		o = startOutboundOnly(t, target, opts...)
		o.resolver.Set(target, startHealthApp(t, small))
		o.outbound.Set(target, policy(1000))
		_, err = healthClient(t, o).Check(testutil.Context(t, 10*time.Second), &healthpb.HealthCheckRequest{Service: service})
		assert.Equal(t, codes.Unavailable, status.Code(err), "the first answer")
		assert.Equal(t, []string{service}, small.services(), "one attempt")
		assert.Equal(t, -1.0, o.r.metric(t, "outbound_http_retries_total", `reason="status"`), "no retry over the limit")
	})
}

// startHealthApp serves h over h2c and returns its (unmeshed) endpoint.
func startHealthApp(t *testing.T, h healthpb.HealthServer) dataplane.Endpoint {
	ln := testutil.Listen(t)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return dataplane.Endpoint{Addr: netipAddrPort(uint16(ln.Addr().(*net.TCPAddr).Port))}
}

// The application's own mesh metadata (l5d-*, weft-*: a forged
// destination, client identity, anything) never leaves the client proxy,
// on either path: an unmeshed endpoint sees the call as the application
// sent it but for them, and the same on both paths.
func TestTheApplicationsMeshFieldsNeverLeaveTheClientProxyOverGRPC(t *testing.T) {
	const target = "forged.shop.svc.cluster.local:80"
	forged := []string{"l5d-dst-canonical", "evil.ns.svc.cluster.local:80", "l5d-client-id", "admin.forged",
		"l5d-require-id", "admin.forged", "l5d-anything", "x", "weft-anything", "forged", "x-app", "kept"}
	var views []map[string]metadata.MD
	onBothOutboundPaths(t, 6, func(t *testing.T, opts ...dataplane.Option) {
		app, seen := startRecordingTestService(t)
		o := startOutboundOnly(t, target, opts...)
		o.resolver.Set(target, endpointOf(app))
		calls := grpcoracle.Calls(t, o.addr, forged)
		require.Equal(t, codes.OK, calls["unary"].Code)
		got := seen.Take()
		require.Len(t, got, 5) // the unknown method reaches no handler
		assert.Equal(t, []string{"kept"}, got["unary"].Get("x-app"), "the application's own metadata is sent")
		for name, md := range got {
			for k := range md {
				assert.NotRegexp(t, "^(l5d|weft)-", k, "call %s: a mesh field of the application's left the proxy", name)
			}
			delete(md, ":authority") // each proxy's own listener
		}
		views = append(views, got)
	})
	require.Len(t, views, 2)
	assert.Equal(t, views[1], views[0], "the endpoint's view on both paths")
}

// What the client proxy's frame path does not take is answered on the
// http.Handler path: a gRPC-looking request with a query, one with a
// content-length, a non-gRPC POST, an HTTP/1 gRPC request. Only the
// plain gRPC call after them takes the frame path.
func TestRequestsTheOutboundFramePathRefusesTakeTheHTTPPath(t *testing.T) {
	const target = "refused.shop.svc.cluster.local:80"
	var frames atomic.Int64
	o := startOutboundOnly(t, target, dataplane.WithGRPCOutFrameCountForTest(&frames))
	app := &bodyHealth{}
	o.resolver.Set(target, startHealthApp(t, app))
	empty := []byte{0, 0, 0, 0, 0} // one empty gRPC message: a HealthCheckRequest{}
	for _, c := range []struct {
		name   string
		client *http.Client
		path   string
		hdr    []string
	}{
		{"query", h2cClient(), "/grpc.health.v1.Health/Check?x=1", []string{"Content-Type", "application/grpc", "Te", "trailers"}},
		{"content-length", h2cClient(), "/grpc.health.v1.Health/Check", []string{"Content-Type", "application/grpc", "Te", "trailers", "Content-Length", "5"}},
		{"not gRPC", h2cClient(), "/grpc.health.v1.Health/Check", []string{"Content-Type", "application/json"}},
		{"HTTP/1", h1Client(), "/grpc.health.v1.Health/Check", []string{"Content-Type", "application/grpc", "Te", "trailers"}},
	} {
		req, err := http.NewRequest(http.MethodPost, o.url(c.path), bytes.NewReader(empty))
		require.NoError(t, err)
		for i := 0; i+1 < len(c.hdr); i += 2 {
			req.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		if c.name != "content-length" {
			req.ContentLength = -1 // sent without one
		}
		resp, err := c.client.Do(req)
		require.NoError(t, err, c.name)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		assert.NotZero(t, resp.StatusCode, "%s: answered", c.name)
		assert.Zero(t, frames.Load(), "%s: not on the frame path", c.name)
	}
	_, err := healthClient(t, o).Check(testutil.Context(t, 10*time.Second), &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), frames.Load(), "a plain gRPC call takes the frame path")
}

// A gRPC call to a Service tells the server proxy the Service's name
// (l5d-dst-canonical from discovery, never the application's forged
// one) on either path of the client proxy: the server proxy's route
// series name the Service and its profile route.
func TestGRPCCallsTellTheServerProxyTheServiceOnEitherPath(t *testing.T) {
	onBothOutboundPaths(t, 2, func(t *testing.T, opts ...dataplane.Option) {
		appLn := testutil.Listen(t)
		gs := grpc.NewServer()
		healthpb.RegisterHealthServer(gs, &bodyHealth{})
		go gs.Serve(appLn)
		t.Cleanup(gs.Stop)
		port := uint16(appLn.Addr().(*net.TCPAddr).Port)

		pk := newPKI(t)
		pols := dataplane.NewMemoryPolicies()
		pols.Set(uint32(port), allowAll(t))
		profB := dataplane.NewMemoryProfiles()
		inB := testutil.Listen(t)
		b := startProxy(t, testConfig(), pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: inB}, dataplane.WithProfiles(profB))

		clusterIP := fmt.Sprintf("10.96.0.10:%d", port)
		fqn := fmt.Sprintf("web.shop.svc.cluster.local:%d", port)
		prof := webProfile(port)
		prof.Routes = []*pdst.Route{{
			Condition:     &pdst.RequestMatch{Match: &pdst.RequestMatch_Path{Path: &pdst.PathMatch{Regex: "/grpc.health.v1.Health/.*"}}},
			MetricsLabels: map[string]string{"route": "health"},
		}}
		profB.Set(fqn, prof)
		profA := dataplane.NewMemoryProfiles()
		profA.Set(clusterIP, prof)
		res := dataplane.NewMemoryResolver()
		res.Set(clusterIP, dataplane.Endpoint{Addr: netipAddrPort(port), Identity: idB, OpaqueTransportPort: uint16(inB.Addr().(*net.TCPAddr).Port)})
		mapped := testutil.Listen(t)
		startProxy(t, testConfig(), pk.identity(t, idA), res, nil,
			dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: clusterIP}}},
			append([]dataplane.Option{dataplane.WithProfiles(profA)}, opts...)...)

		cc, err := grpc.NewClient("passthrough:///"+mapped.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer cc.Close()
		for range 2 {
			ctx := metadata.AppendToOutgoingContext(testutil.Context(t, 10*time.Second), "l5d-dst-canonical", "admin.shop.svc.cluster.local:1")
			_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			require.NoError(t, err)
		}
		testutil.Eventually(t, 5*time.Second, func() bool {
			return b.metric(t, "route_response_total", `direction="inbound"`) == 2
		}, "the server proxy counts the responses")
		assert.Equal(t, 2.0, b.metric(t, "route_request_total", `direction="inbound"`, `dst="`+fqn+`"`, `rt_route="health"`))
		for _, l := range routeLines(t, b, "inbound") {
			assert.NotContains(t, l, "admin.shop", "the forged name is no label")
		}
	})
}

// meshHealth answers with mesh metadata of its own in the header and the
// trailers, as a hostile or confused endpoint could.
type meshHealth struct {
	healthpb.UnimplementedHealthServer
}

func (meshHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_ = grpc.SetHeader(ctx, metadata.Pairs("l5d-proxy-error", "forged", "weft-deny-reason", "forged", "l5d-anything", "x", "x-app", "head"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("l5d-proxy-error", "forged", "weft-anything", "x", "x-app-trailer", "tail"))
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// An unmeshed endpoint's mesh metadata (l5d-*, weft-*, even the two a
// peer proxy may explain its answers with) never reaches the
// application, in the header or the trailers, on either path.
func TestAnUnmeshedEndpointsMeshFieldsNeverReachTheApplicationOverGRPC(t *testing.T) {
	const target = "meshy.shop.svc.cluster.local:80"
	onBothOutboundPaths(t, 1, func(t *testing.T, opts ...dataplane.Option) {
		o := startOutboundOnly(t, target, opts...)
		o.resolver.Set(target, startHealthApp(t, meshHealth{}))
		var head, tail metadata.MD
		_, err := healthClient(t, o).Check(testutil.Context(t, 10*time.Second), &healthpb.HealthCheckRequest{}, grpc.Header(&head), grpc.Trailer(&tail))
		require.NoError(t, err)
		assert.Equal(t, []string{"head"}, head.Get("x-app"))
		assert.Equal(t, []string{"tail"}, tail.Get("x-app-trailer"))
		for _, md := range []metadata.MD{head, tail} {
			for k := range md {
				assert.NotRegexp(t, "^(l5d|weft)-", k, "an endpoint's mesh field reached the application")
			}
		}
	})
}
