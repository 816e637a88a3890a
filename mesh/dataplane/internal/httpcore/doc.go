// Package httpcore is the HTTP vocabulary the proxy's inbound and
// outbound paths share: the mesh's own headers (l5d-*, weft-*) and the
// rule that strips them, the answers the proxy makes itself ([Answer],
// [WriteAnswer]: an HTTP status with a short text body, or a
// trailers-only gRPC status, with l5d-proxy-error), the request sent
// upstream ([OutgoingRequest], with informational responses relayed by
// [Forward1xx]), the client's body as it is forwarded ([ClientBody],
// which keeps its first error so that a failed exchange is blamed on the
// right side) and the response copied back ([CopyResponse]), and a
// protocol upgrade forwarded on a connection of its own and tunnelled
// after a 101 ([ForwardUpgrade], whose causes [UpgradeAnswer] answers).
// Its seams are values: the caller's dial, answer and record functions,
// and, to find the connection whose write side a tunnel shuts, the
// NetConn method each of the proxy's connection wrappers has.
//
// What it trusts: nothing it is given. Every l5d-* and weft-* header from
// a client, an application or an upstream is dropped here
// ([RemoveMeshHeaders]); the two HTTP sides decide which of them they
// set or keep from a peer proxy (mesh TLS with the transport header).
// Messages the proxy writes into l5d-proxy-error lose control characters
// and are cut at 200 bytes; grpc-message is percent-encoded and cut at
// 512 bytes. Hop-by-hop headers are removed by internal/h1's rules.
//
// Cost: none of it is behind an interface; the buffers that copy bodies
// are pooled (4 KiB for bodies known to be small, the relay's 32 KiB
// otherwise).
//
// It imports internal/h1 (hop-by-hop rules, framing errors) and
// internal/relay (the copy buffers), nothing else of the proxy.
package httpcore
