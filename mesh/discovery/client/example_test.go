package client_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/runtime"
)

// Resolve an authority and follow it, as a proxy does.
func ExampleClient_Watch() {
	// A Destination server to talk to.
	idx, _ := discovery.NewIndex()
	defer idx.Close()
	_ = idx.Replace([]runtime.Object{
		dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080}),
		dt.EndpointSlice("shop", "web-a", "web", []dt.SlicePort{{Name: "http", Port: 8080}}, dt.Endpoint("10.0.0.1", "")),
	})
	srv, _ := discovery.NewServer(idx)
	gs := grpc.NewServer()
	srv.Register(gs)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	c, _ := client.New(ctx, conn, client.WithContextToken(`{"ns":"shop"}`))
	defer c.Close()

	w, _ := c.Watch(ctx, "web.shop.svc.cluster.local:80")
	defer w.Close()
	if err := w.Wait(ctx); err != nil {
		fmt.Println(err)
		return
	}
	set, _ := w.Endpoints()
	for _, e := range set.Endpoints {
		fmt.Println(e.Addr)
	}
	// Output: 10.0.0.1:8080
}
