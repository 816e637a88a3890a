package grpclimit_test

import (
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weftmesh/weft/mesh/grpclimit"
)

// A server with the default limits, two of them changed; the caller owns
// the listener and registers its services.
func ExampleNewServer() {
	l := grpclimit.Defaults()
	l.MaxWatches = 50000
	l.RequestTimeout = 5 * time.Second
	srv, err := grpclimit.NewServer(l)
	if err != nil {
		fmt.Println(err)
		return
	}
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	fmt.Println("watches in use:", srv.Watches().InUse())
	// Output: watches in use: 0
}

// The watch limit alone, on a server built without NewServer.
func ExampleWatches() {
	w := grpclimit.NewWatches(20000, 2000)
	srv := grpc.NewServer(grpc.ChainStreamInterceptor(w.StreamServerInterceptor()))
	defer srv.Stop()
	fmt.Println(w.InUse(), w.Refused())
	// Output: 0 0
}
