package h2server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestGRPCGoClientsCallThroughTheServer serves grpc-go's own server (as
// an http.Handler) on ServeConn and calls it with grpc-go's client:
// unary calls, an unknown service's error status (trailers-only), and a
// server stream that the client cancels.
func TestGRPCGoClientsCallThroughTheServer(t *testing.T) {
	gs := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	ts := startServer(t, gs, nil)

	cc, err := grpc.NewClient(ts.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer cc.Close()
	client := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for i := 0; i < 20; i++ {
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc"})
		require.NoError(t, err)
		assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
	}
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown"})
	assert.Equal(t, codes.NotFound, status.Code(err), "an error status arrives: %v", err)

	wctx, wcancel := context.WithCancel(ctx)
	stream, err := client.Watch(wctx, &healthpb.HealthCheckRequest{Service: "svc"})
	require.NoError(t, err)
	first, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())
	hs.SetServingStatus("svc", healthpb.HealthCheckResponse_NOT_SERVING)
	next, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, next.GetStatus())
	wcancel()
	_, err = stream.Recv()
	assert.Equal(t, codes.Canceled, status.Code(err))
	cc.Close()
	gs.Stop()
}
