// Package upstream holds the proxy's pools of connections to the
// upstreams of HTTP requests, shared by both directions:
//
//   - [H2Pool]: multiplexed HTTP/2 connections ([h2client.Conn]), keyed
//     by [Key]. Mesh TLS to peer proxies (Key.Identity set) for outbound
//     HTTP/2 requests and, with HTTP1OverH2, HTTP/1 ones; h2c to the
//     local application (inbound HTTP/2 and gRPC, including the frame
//     path's [H2Pool.RoundTripFields]) and to unmeshed endpoints that
//     the client spoke HTTP/2 to. A new connection is dialled only when
//     every open one is at its stream limit, one dial at a time per
//     upstream, up to 8 per upstream. A request the upstream did not
//     process (refused stream, GOAWAY race) is sent once more when its
//     caller gives it the body again from its start (the kept body of a
//     retry), or it has none; never with the first try's reader, which
//     the HTTP/2 client may have read from and has closed.
//   - [PeerH1Pool]: HTTP/1.1 over mesh TLS to peer proxies, one request
//     at a time per connection, with a wait deadline and a share per
//     downstream client (issue 27).
//   - [PlainConnReusable]: the idle check the proxy's plaintext HTTP/1
//     clients (to the application, to unmeshed endpoints) use.
//
// # What it trusts
//
// Nothing it dials. Peer proxies and applications may be hostile or
// stuck; the bounds kept here are:
//
//   - the HTTP/1.1 pool holds at most 128 connections per peer endpoint,
//     and one downstream client (its source address) at most 64 of them,
//     so that a client holding its share (slow uploads, responses it
//     never reads) leaves as many for the others;
//   - a request waits for a pooled HTTP/1.1 connection at most
//     Settings.WaitTimeout (DefaultWaitTimeout, 3 s, when unset) and
//     then gets an *h1.PoolTimeoutError, which the proxy answers 503
//     "pool-timeout"; a wait also ends with the request's context;
//   - an idle HTTP/1.1 connection to a peer is closed after half the
//     proxy's HTTP idle timeout (at most 90 s), and one idle for more
//     than a few milliseconds is checked before reuse (a close by the
//     peer, or bytes nobody asked for, and it is not reused);
//   - the HTTP/2 pool opens at most 8 connections per upstream (then
//     requests queue for a stream), and h2client bounds each connection:
//     response header size, windows, the unread body bytes it holds,
//     keepalive pings and its idle timeout (see its package doc);
//   - Sweep, called periodically, forgets upstreams with no live
//     connection and closes HTTP/1.1 connections idle too long, so the
//     maps hold only upstreams in use; CloseAll closes everything and
//     refuses new requests when the proxy stops.
//
// # Seams
//
// The pools know nothing of the proxy. What they need is passed in: a
// [Dialer] (the mesh TLS dial with the transport header, the plain dial
// with the connect timeout, and the wrapper that counts a connection in
// the transport metrics, given the [Labels] of the request that made it)
// and [Settings] (h2client options, the idle timeout, the wait deadline,
// the header limit). Errors keep the "dataplane:" prefix of the package
// they came from: their text reaches the proxy's answers
// (l5d-proxy-error) and logs unchanged. A failure to connect is an
// [httpcore.DialError], which the proxy answers 503 and may try on
// another endpoint.
//
// It links the HTTP codecs (h1, h2client), httpcore's errors, relay's
// idle-socket peek, the endpoint value and the transport header's
// protocol, and nothing of the dataplane package, either direction's
// HTTP side, the HTTP/2 server or discovery (internal/depstest).
package upstream
