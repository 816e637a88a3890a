package h2server

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// processCPU is the process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveRelay serves h (and cfg's Streams) on a loopback listener.
func serveRelay(b *testing.B, h http.Handler, streams *StreamHandler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := &Config{MaxConcurrentStreams: 100, Streams: streams}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go ServeConn(ctx, c, h, cfg)
		}
	}()
	b.Cleanup(func() { ln.Close(); cancel(); <-done })
	return ln.Addr().String()
}

// BenchmarkRelayGRPCUnary relays unary gRPC calls (the interop
// service's UnaryCall, 100-byte messages, 8 goroutines per CPU) from
// grpc-go's client through this server to grpc-go's server, the
// upstream leg on h2client: path=http relays as the inbound proxy does
// (http.Request, ResponseWriter, httpcore.CopyResponse), path=frames
// through the Stream API (the test's frameRelay, which still builds an
// http.Request for h2client), path=fields through the Stream API and
// h2client's RoundTripFields (fieldRelay). cpu-us/op is the whole process's CPU per
// call, the grpc-go peers' included (the same for both paths). Run with
// -count N to alternate the two.
func BenchmarkRelayGRPCUnary(b *testing.B) {
	app, _ := startRecordingGRPC(b)
	for _, path := range []string{"http", "frames", "fields"} {
		b.Run("path="+path, func(b *testing.B) {
			cc := dialApp(b, app)
			var addr string
			switch path {
			case "http":
				addr = serveRelay(b, httpRelay(cc, app), nil)
			case "frames":
				addr = serveRelay(b, http.NotFoundHandler(), frameRelay(cc, app))
			default:
				addr = serveRelay(b, http.NotFoundHandler(), fieldRelay(cc))
			}
			conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(b, err)
			defer conn.Close()
			client := testgrpc.NewTestServiceClient(conn)
			req := &testgrpc.SimpleRequest{ResponseSize: 100, Payload: &testgrpc.Payload{Body: make([]byte, 100)}}
			ctx := context.Background()
			_, err = client.UnaryCall(ctx, req)
			require.NoError(b, err)
			b.ReportAllocs()
			start := processCPU()
			b.ResetTimer()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.UnaryCall(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-start)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
}
