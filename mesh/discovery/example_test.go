package discovery_test

import (
	"fmt"
	"net"

	"github.com/weftmesh/weft/mesh/discovery"
	dt "github.com/weftmesh/weft/mesh/discovery/discoverytest"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
)

// Resolve a service from Kubernetes objects, with no server or cluster.
func ExampleResolveEndpoints() {
	objs := []runtime.Object{
		dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080}),
		dt.Pod("shop", "web-1", "10.0.0.1", "web", dt.Meshed("weft", 0)),
		dt.EndpointSlice("shop", "web-a", "web", []dt.SlicePort{{Name: "http", Port: 8080}}, dt.Endpoint("10.0.0.1", "web-1")),
	}
	set, err := discovery.ResolveEndpoints(objs, "web.shop.svc.cluster.local:80")
	if err != nil {
		panic(err)
	}
	for _, e := range set.Endpoints {
		fmt.Println(e.Addr, e.Identity, e.Hint)
	}
	// Output: 10.0.0.1:8080 web.shop.serviceaccount.identity.weft.cluster.local h2
}

// Serve the Destination API from an index fed with objects.
func ExampleNewServer() {
	idx, err := discovery.NewIndex(discovery.WithClusterDomain("cluster.local"))
	if err != nil {
		panic(err)
	}
	defer idx.Close()
	_ = idx.Upsert(dt.Service("shop", "web", "10.96.0.10", dt.ServicePort{Name: "http", Port: 80, TargetPort: 8080}))

	srv, err := discovery.NewServer(idx)
	if err != nil {
		panic(err)
	}
	gs := grpc.NewServer() // the caller owns the gRPC server and its listener
	srv.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	fmt.Println("serving", idx.Stats().Objects["Service"], "service")
	// Output: serving 1 service
}
