// Package outbound is the proxy's outbound HTTP side: every request the
// local application sends on a connection the L4 outbound path
// (internal/l4) found a Service for goes through [HTTP.Serve]. In steps:
// the request's route is selected (by its normalized path, host, method,
// headers and query) from the Service's router; a request the route
// answers itself gets its answer here (CONNECT, no route, a redirect, an
// injected fault); the route's request and idle timeouts bound it; then
// it is sent in attempts, each to an endpoint a backend's balancer
// picks, within the route's retry policy and the Service's retry budget
// (a protocol upgrade in one attempt, on a connection of its own), and
// the answer relayed with the route's response filters. A step that
// fails returns a cause, and one function (outboundAnswer) maps each
// cause to the proxy's answer: its status, gRPC status and
// l5d-proxy-error class. The package also owns the request body kept for
// retries ([ReplayBody]), what a response tells the balancer (its
// failure, its overload hint, its Retry-After or gRPC pushback), and the
// tap view of an outbound request. [HTTP.ServeFrames] runs the same
// steps for a plain gRPC call from an HTTP/2 client given as header
// fields and a body (httpcore.FrameStream, what [AcceptGRPC] takes),
// sent with [HTTP].RoundTripFields, without http.Request or
// ResponseWriter (frames.go).
//
// What it trusts, and from whom:
//
//   - The client is the local application. Its request is forwarded,
//     not believed: every l5d-* and weft-* header it sends is removed
//     (httpcore.RemoveMeshHeaders), as are hop-by-hop headers, before
//     the route's filters apply; l5d-dst-canonical, which tells a peer
//     proxy the Service's name, is set here from discovery
//     ([Names].Canonical), never taken from the client. What the
//     request may do is the route's to say: CONNECT is refused (the
//     explicit CONNECT listener serves it), a request no route matches
//     gets 404, a retry needs the route's policy, an idempotent method
//     (or one the route covers) and a body small enough to replay.
//   - Endpoints are peers, reached over the pools internal/l4 wires
//     (internal/upstream) ([HTTP].RoundTrip): a meshed endpoint's identity is the one
//     mesh TLS verified when the connection was dialled. Its response is
//     relayed with mesh headers removed, except the two that explain a
//     peer proxy's own answers when the endpoint is one
//     (httpcore.CleanResponseHeader). What it says about itself (a
//     failure status, 429 or 503, Retry-After, gRPC pushback) only
//     steers the balancer and the retry's wait, which the route keeps
//     between its minimum and maximum backoff. An upgrade becomes a
//     tunnel only when the endpoint answers 101 for the protocol asked
//     for; a body it breaks is broken to the client too.
//   - The Service ([Service]: its router, budget, backends and series)
//     is internal/meshstate's, built from the destination's outbound
//     policy and profile as the control plane sent them.
//
// Seams: what it reads of the proxy it is given in [HTTP]'s fields, as
// values and plain functions (the round trip over the pools, the dials
// of an upgrade, the counters, the tap hub, the logger, the clock), and
// per request the connection's [httpcore.Conn] and its [Service]. The
// Service and its [Backend]s are the package's only interfaces: they
// are internal/meshstate's state of a destination, which discovery
// and the L4 paths share. A backend's balancer is a concrete type, so
// that the endpoints a request tried stay on its stack; a request that
// no tap takes and that no error ends allocates nothing here beyond what
// it did in the dataplane package (BenchmarkHTTP1Throughput and
// BenchmarkHTTPGRPCUnary in mesh/dataplane count it).
//
// It imports the shared HTTP vocabulary (internal/httpcore,
// internal/h1), the request metrics (internal/reqmetrics), tap, the
// route, balance and retry packages and the public Endpoint type
// (mesh/dataplane/endpoint); never the dataplane package, the inbound
// side, the HTTP/2 server or client, or discovery.
package outbound
