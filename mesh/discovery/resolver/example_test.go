package resolver_test

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/discovery/client"
	"github.com/weftmesh/weft/mesh/discovery/resolver"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial a service by name through Weft discovery.
func ExampleNewBuilder() {
	dst, _ := grpc.NewClient("127.0.0.1:8086", grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer dst.Close()
	c, _ := client.New(context.Background(), dst)
	defer c.Close()

	conn, err := grpc.NewClient("weft:///web.shop.svc.cluster.local:8080",
		grpc.WithResolvers(resolver.NewBuilder(c)),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println(conn.Target())
	// Output: weft:///web.shop.svc.cluster.local:8080
}
