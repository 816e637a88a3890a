// Package resolver lets any gRPC client use Weft discovery: it adapts a
// discovery client to gRPC's resolver.Builder.
//
//	c, _ := client.New(ctx, destinationConn)
//	conn, err := grpc.NewClient("weft:///web.shop.svc.cluster.local:8080",
//		grpc.WithResolvers(resolver.NewBuilder(c)),
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
//		grpc.WithTransportCredentials(...))
//
// The builder is registered with the connection (grpc.WithResolvers),
// never globally. Each resolver watches its target's authority and hands
// gRPC every endpoint as an address, with the endpoint's discovery data
// (identity, weight, protocol hint) attached; Endpoint reads it back, for
// example to check the server's identity in a TLS handshake. When the
// Destination server is away the last known addresses stay in use. A
// malformed authority is reported to gRPC as a resolver error.
package resolver
