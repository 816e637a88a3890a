// Package inbound is the proxy's inbound HTTP side: every request for the
// local application, from a meshed client's proxy or from an unmeshed
// client, goes through [HTTP.Serve]. In steps: CONNECT is refused; the
// request is authorized by its port's policy (the shared evaluator,
// mesh/policy/authz, on the normalized path it then forwards, and the
// Server's server_ips), then counted against the port's local rate limit
// (Linkerd's HTTPLocalRateLimitPolicy, [LimitFor]); the header the
// application sees is prepared; the request is sent (or, for a protocol
// upgrade, forwarded on a connection of its own) and the answer relayed.
// A step that fails returns a cause, and one function (inboundAnswer)
// maps each cause to the proxy's answer: its status, gRPC status and
// l5d-proxy-error class. The package also owns the inbound request
// series (the authorization counters, the request series of the policy
// route and of the profile route) and the tap view of an inbound request.
//
// What it trusts, and from whom:
//
//   - The peer's identity ([Conn].Peer) is the one mesh TLS verified
//     (internal/l4 fills it when it accepts the connection);
//     the application receives it in l5d-client-id, set here only for a
//     mesh TLS client with an identity. A client cannot send its own: every
//     l5d-* and weft-* header from a client is removed
//     (httpcore.RemoveMeshHeaders), as are hop-by-hop headers.
//   - [Conn].FromProxy means mesh TLS and the transport header: a peer
//     proxy. Only from a peer proxy are two headers read before they are
//     removed: l5d-orig-proto (on an HTTP/2 request, only the values
//     Linkerd's proxies send, [OrigProto]: the request goes to the
//     application over HTTP/1) and l5d-dst-canonical (with one value; it
//     names the Service for the route-level metrics, and is a question
//     to discovery through HTTP.Route, never a label by itself). The
//     transport header's name ([Conn].DstName) is read the same way.
//   - Everything else of the request is the client's and is decided on by
//     the policy: a request no authorization admits, no route matches,
//     whose path is ambiguous or that a header or query parameter makes
//     ambiguous gets its denial (403, 404, 400; PERMISSION_DENIED for
//     gRPC), with weft-deny-reason naming the class; a request HTTP/1
//     cannot carry (a header from an HTTP/2 client) gets 400.
//
// Seams: what it reads of the proxy it is given in [HTTP]'s fields, as
// values and plain functions (the policy cache, the profile routes, the
// request metrics, the tap hub, the clients to the application, the
// access log's timer). None is an interface, each is called at most once
// per request, and a request that no tap takes and that no error ends
// allocates nothing here beyond what it did in the dataplane package
// (BenchmarkHTTP1Throughput and BenchmarkHTTPGRPCUnary in mesh/dataplane
// count it). [Policy] is one port's policy snapshot as the dataplane
// package's policy cache builds it; the request series and the rate
// limit's buckets live on it, so that an update drops them with it (the
// buckets of the same limits carry over).
//
// It imports the shared HTTP vocabulary (internal/httpcore, internal/h1),
// the request metrics (internal/reqmetrics, internal/metricstore), tap,
// the rate limiter and the route package's response classes; never the
// dataplane package, the outbound side, or balancing.
package inbound
