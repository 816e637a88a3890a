package resolver_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcresolver "google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/client"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"github.com/weftmesh/weft/mesh/discovery/resolver"
)

// serveDestination serves idx as a Destination API on loopback, as
// `weft controller destination` does, and returns a connection to it.
func serveDestination(idx *discovery.Index) (*grpc.ClientConn, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv, _ := discovery.NewServer(idx)
	gs := grpc.NewServer()
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	return conn, func() { conn.Close(); gs.Stop() }
}

// api describes Service api.shop (port 80) whose endpoints listen on the
// given ports of 127.0.0.1.
func api(ports ...int32) []runtime.Object {
	objs := []runtime.Object{dt.Namespace("shop"), dt.Service("shop", "api", "10.96.0.30", dt.ServicePort{Name: "grpc", Port: 80, TargetPort: 9000})}
	for i, p := range ports {
		objs = append(objs, dt.EndpointSlice("shop", fmt.Sprintf("api-%d", i), "api", []dt.SlicePort{{Name: "grpc", Port: p}}, dt.Endpoint("127.0.0.1", "")))
	}
	return objs
}

// Dial a service by name through Weft discovery: the target
// weft:///api.shop.svc.cluster.local:80 resolves to the Service's
// endpoints, here one gRPC health server on loopback.
func ExampleNewBuilder() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	backend := grpc.NewServer()
	healthpb.RegisterHealthServer(backend, health.NewServer())
	go func() { _ = backend.Serve(lis) }()
	defer backend.Stop()

	idx, _ := discovery.NewIndex()
	defer idx.Close()
	_ = idx.Replace(api(int32(lis.Addr().(*net.TCPAddr).Port)))
	dst, stop := serveDestination(idx)
	defer stop()
	c, _ := client.New(ctx, dst)
	defer c.Close()

	conn, err := grpc.NewClient("weft:///api.shop.svc.cluster.local:80",
		grpc.WithResolvers(resolver.NewBuilder(c)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.GetStatus())
	// Output: SERVING
}

// updates is a grpc resolver.ClientConn that hands each state on; gRPC's
// own ClientConn plays this part when the builder is given to
// grpc.WithResolvers.
type updates chan grpcresolver.State

func (u updates) UpdateState(s grpcresolver.State) error               { u <- s; return nil }
func (u updates) ReportError(error)                                    {}
func (u updates) NewAddress([]grpcresolver.Address)                    {}
func (u updates) ParseServiceConfig(string) *serviceconfig.ParseResult { return nil }

// The resolver follows the endpoints: when discovery's answer changes, gRPC
// gets the new address list, with what discovery knows of each endpoint
// (resolver.Endpoint).
func ExampleBuilder_Build() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	idx, _ := discovery.NewIndex()
	defer idx.Close()
	_ = idx.Replace(api(9001))
	dst, stop := serveDestination(idx)
	defer stop()
	c, _ := client.New(ctx, dst)
	defer c.Close()

	got := make(updates, 4)
	var target grpcresolver.Target
	target.URL.Scheme, target.URL.Path = "weft", "/api.shop.svc.cluster.local:80"
	r, err := resolver.NewBuilder(c).Build(target, got, grpcresolver.BuildOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	show := func() {
		select {
		case s := <-got:
			var addrs []string
			for _, a := range s.Addresses {
				if _, ok := resolver.Endpoint(a); ok { // discovery's data rides along
					addrs = append(addrs, a.Addr)
				}
			}
			fmt.Println(addrs)
		case <-ctx.Done():
			fmt.Println("no update")
		}
	}
	show()
	_ = idx.Replace(api(9001, 9002)) // a second endpoint is ready
	show()
	// Output:
	// [127.0.0.1:9001]
	// [127.0.0.1:9001 127.0.0.1:9002]
}
