package dataplane_test

import (
	"context"
	"net"
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

	"github.com/weftmesh/weft/apis/proxy/grpcroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The v0.20 outbound fields with real gRPC peers: a grpc-go server behind
// the outbound proxy, a grpc-go client in front of it.

// scriptedHealth answers Check with what answer says for the n-th call
// (from 1), recording when each call arrived.
type scriptedHealth struct {
	healthpb.UnimplementedHealthServer
	answer   func(ctx context.Context, n int) error
	mu       sync.Mutex
	arrivals []time.Time
}

func (s *scriptedHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	n := len(s.arrivals)
	s.mu.Unlock()
	if err := s.answer(ctx, n); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (s *scriptedHealth) calls() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...)
}

// startScriptedGRPC serves h in cleartext HTTP/2 and returns its endpoint.
func startScriptedGRPC(t *testing.T, h *scriptedHealth) dataplane.Endpoint {
	ln := testutil.Listen(t)
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return dataplane.Endpoint{Addr: netipAddrPort(uint16(ln.Addr().(*net.TCPAddr).Port))}
}

// grpcPolicy routes every call of target with rule, under accrual.
func grpcPolicy(accrual *outbound.FailureAccrual, rule *outbound.GrpcRoute_Rule) *outbound.OutboundPolicy {
	rule.Matches = []*grpcroute.GrpcRouteMatch{{}}
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Grpc_{Grpc: &outbound.ProxyProtocol_Grpc{
		Routes:         []*outbound.GrpcRoute{{Metadata: routeMeta("health"), Rules: []*outbound.GrpcRoute_Rule{rule}}},
		FailureAccrual: accrual,
	}}}}
}

func healthClient(t *testing.T, o *outboundOnly) healthpb.HealthClient {
	cc, err := grpc.NewClient("passthrough:///"+o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { cc.Close() })
	return healthpb.NewHealthClient(cc)
}

func check(t *testing.T, c healthpb.HealthClient) codes.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return status.Code(err)
}

func TestAGRPCCallAnsweredUnavailableWithPushbackIsRetriedNoSooner(t *testing.T) {
	// The retry waits on real time; the check is a lower bound, which load
	// can only make later.
	const target = "pushback.shop.svc.cluster.local:80"
	app := &scriptedHealth{answer: func(ctx context.Context, n int) error {
		if n == 1 {
			// A trailers-only answer: the status and this hint arrive with
			// the response headers.
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", "1500"))
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	}}
	o := startOutboundOnly(t, target)
	o.resolver.Set(target, startScriptedGRPC(t, app))
	o.outbound.Set(target, grpcPolicy(nil, &outbound.GrpcRoute_Rule{Retry: &outbound.GrpcRoute_Retry{
		MaxRetries: 1,
		Conditions: &outbound.GrpcRoute_Retry_Conditions{Unavailable: true},
		Backoff:    &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Millisecond), MaxBackoff: durationpb.New(10 * time.Second), RespectRetryAfterHint: true},
	}}))

	assert.Equal(t, codes.OK, check(t, healthClient(t, o)), "the retry succeeds")
	calls := app.calls()
	require.Len(t, calls, 2)
	assert.GreaterOrEqual(t, calls[1].Sub(calls[0]), 1500*time.Millisecond, "grpc-retry-pushback-ms: 1500 is honoured")
}

func TestTheUnifiedBreakerEjectsAGRPCEndpointThatAnswersUnavailableAndLetsItBack(t *testing.T) {
	const target = "grpc-flaky.shop.svc.cluster.local:80"
	var failing atomic.Bool
	failing.Store(true)
	app := &scriptedHealth{answer: func(context.Context, int) error {
		if failing.Load() {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}}
	clock := newFakeClock()
	o := startOutboundOnly(t, target, dataplane.WithClock(clock.now))
	o.resolver.Set(target, startScriptedGRPC(t, app))
	o.outbound.Set(target, grpcPolicy(&outbound.FailureAccrual{Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
		MaxConsecutiveFailures: 2,
		Backoff:                &outbound.ExponentialBackoff{MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(time.Minute)},
	}}}, &outbound.GrpcRoute_Rule{}))
	c := healthClient(t, o)

	for i := 0; i < 2; i++ {
		require.Equal(t, codes.Unavailable, check(t, c))
	}
	require.Len(t, app.calls(), 2)
	for i := 0; i < 3; i++ {
		assert.Equal(t, codes.Unavailable, check(t, c), "ejected: the proxy answers")
	}
	assert.Len(t, app.calls(), 2, "an ejected endpoint gets no calls")

	failing.Store(false)
	clock.advance(10 * time.Second)
	assert.Equal(t, codes.OK, check(t, c), "after its backoff the probe reaches it")
	assert.Equal(t, codes.OK, check(t, c), "and it is back")
	assert.Len(t, app.calls(), 4)
}

func TestRateLimitedGRPCAnswersTripTheUnifiedBreakerBySuccessRateNotByRun(t *testing.T) {
	const target = "grpc-limited.shop.svc.cluster.local:80"
	app := &scriptedHealth{answer: func(context.Context, int) error {
		return status.Error(codes.ResourceExhausted, "slow down")
	}}
	clock := newFakeClock()
	o := startOutboundOnly(t, target, dataplane.WithClock(clock.now))
	o.resolver.Set(target, startScriptedGRPC(t, app))
	o.outbound.Set(target, grpcPolicy(&outbound.FailureAccrual{Kind: &outbound.FailureAccrual_Unified_{Unified: &outbound.FailureAccrual_Unified{
		SuccessRateThreshold: 0.5, Decay: durationpb.New(10 * time.Second), MinRequests: 4, MaxConsecutiveFailures: 2,
		Backoff: &outbound.ExponentialBackoff{MinBackoff: durationpb.New(10 * time.Second), MaxBackoff: durationpb.New(time.Minute)},
	}}}, &outbound.GrpcRoute_Rule{}))
	c := healthClient(t, o)

	for i := 0; i < 4; i++ {
		require.Equal(t, codes.ResourceExhausted, check(t, c), "answer %d reaches the client: RESOURCE_EXHAUSTED is no run of failures", i+1)
	}
	assert.Equal(t, codes.Unavailable, check(t, c), "4 rate-limited answers out of 4: below 50%, ejected")
	assert.Len(t, app.calls(), 4)
}
