// Package client is the proxy side of discovery: it resolves authorities
// into live endpoint sets and profiles over the Destination API, and keeps
// serving what it last knew while the control plane is away.
//
// A Client wraps a gRPC connection to a Destination server (Weft's or
// Linkerd's; the API is the same):
//
//	c, err := client.New(ctx, conn, client.WithContextToken(`{"ns":"shop"}`))
//	w, err := c.Watch(ctx, "web.shop.svc.cluster.local:80")
//	if err := w.Wait(ctx); err != nil { ... }   // first answer, or a malformed authority
//	for {
//		set, _ := w.Endpoints()                 // the current set, sorted by address
//		use(set)
//		<-w.Updated()
//	}
//
// Each Watch holds one Destination.Get stream. When the stream breaks (the
// server restarts, the network drops), the watch keeps its last set,
// reports the error through Err, and reconnects with jittered exponential
// backoff (100ms doubling to 5s by default). The first message of the new
// stream replaces the old state, as the proxy API's contract says, so a
// client converges on the restarted server's view without ever dropping to
// an empty set in between. A server answer of InvalidArgument (a malformed
// authority) is permanent: the watch stops and Wait and Err return it.
//
// WatchProfile does the same for Destination.GetProfile.
//
// The resolver subpackage adapts a Client to gRPC's resolver.Builder, so
// any gRPC client can dial "weft:///web.shop.svc.cluster.local:80".
package client
