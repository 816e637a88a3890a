// Package dataplane is Weft's proxy: the sidecar that carries every byte
// between meshed workloads. It has two layers: layer 4 (listeners,
// transparent and explicit capture, protocol detection, mutual TLS between
// proxies, TCP forwarding with connection-level balancing, inbound
// authorization, the admin server and graceful drain) and, for traffic
// detected as HTTP/1, HTTP/2 or gRPC, request-level proxying (routing,
// balancing, retries, timeouts, circuit breaking, per-route authorization
// and golden metrics).
//
// # A tour
//
// A proxy is built from a [Config] and three small inputs, each an
// interface defined here with an in-memory implementation beside it:
//
//   - [Identity]: the workload's name, current certificate and trust roots
//     ([StaticIdentity]). The identity client satisfies it.
//   - [Resolver]: a watch of the endpoints of an authority or IP:port
//     ([MemoryResolver]). The destination client satisfies it.
//   - [InboundPolicies]: a watch of each application port's policy, as the
//     proxy API's own io.linkerd.proxy.inbound Server message
//     ([MemoryPolicies]). The inbound policy client satisfies it.
//
// Two optional inputs shape HTTP traffic, passed as options:
//
//   - [OutboundPolicies] ([WithOutboundPolicies]): the proxy API's
//     io.linkerd.proxy.outbound OutboundPolicy of each destination
//     (HTTPRoute and GRPCRoute rules, weighted backends, filters,
//     timeouts, retries, failure accrual; [MemoryOutboundPolicies]).
//   - [Profiles] ([WithProfiles]): the DestinationProfile of each
//     destination (ServiceProfile routes, retry budget, traffic split;
//     [MemoryProfiles]).
//
// [New] builds the proxy and [Proxy.Run] serves the [Listeners] the caller
// opened (usually with [Listen]) until its context ends, then drains.
//
//	cfg, err := dataplane.LoadEnv()            // WEFT_PROXY_* variables
//	p, err := dataplane.New(ctx, cfg, id, resolver, policies, dataplane.WithLogger(log))
//	ls, err := dataplane.Listen(ctx, cfg)
//	err = p.Run(ctx, ls)                      // returns nil after the drain
//
// [Config] holds only the proxy's own settings (listeners, ports, policy
// defaults, timeouts, limits; [Settings] lists their variables). Where the
// control plane is and which workload the proxy speaks for are the
// business of whatever builds the inputs: mesh/dataplane/control reads
// them into its own Config for Connect. The log level and format are the
// binary's: a program passes its logger with [WithLogger].
//
// # Connections
//
// Outbound, a connection arrives redirected by iptables (its original
// destination read with SO_ORIGINAL_DST, IPv4 and IPv6), through an HTTP
// CONNECT listener, or on a static port mapped to one authority. The target
// is resolved through the Resolver (one shared watch per target), the first
// bytes are classified (package detect) unless discovery says the
// destination is opaque, and an endpoint is chosen by power of two choices
// over open connections. An endpoint with an identity is dialled with
// TLS 1.3 whose SNI is that identity; the server must present exactly it.
// After the handshake the client sends the transport header (package
// transport) naming the application port and the detected protocol. An
// endpoint without identity gets plaintext; a target discovery does not
// know is forwarded to its original destination unchanged. When the
// destination's outbound policy routes whole connections (TLSRoutes by
// the SNI of the client's ClientHello, read without answering it by
// internal/clienthello; a TCPRoute), an opaque connection goes to the
// route's backend instead, with every byte read so far
// (internal/l4, streams.go).
//
// Inbound, the first bytes decide: a TLS ClientHello whose SNI is this
// proxy's identity is terminated with mutual TLS and the client identity is
// the single DNS SAN of its verified certificate (never a header, never the
// common name). Both directions verify the peer's chain with the mesh's one
// rule, identity.VerifyPeerChain, which the identity client applies too;
// anything else is plaintext (or the application's own TLS)
// from a client without identity. The port comes from the transport header,
// which only a client with a verified identity may send, or the original
// destination; a port the proxy itself listens on ([Proxy.Own]) or a skip
// port is refused, and with Config.InboundPortsOnly (the local mesh, where
// loopback is shared) so is any port that is not one of InboundPorts. For an opaque connection the port's policy is evaluated
// with the shared evaluator (mesh/policy/authz), server-level
// authorizations only; a denied connection is closed, an allowed one is
// forwarded to the application on InboundForwardHost (127.0.0.1). HTTP is
// authorized request by request (below). A port whose policy declares
// HTTP/1, HTTP/2 or gRPC serves HTTP only (other bytes get 400), and a
// client silent, or stopped inside what could still be an HTTP request, at
// the detect timeout is closed. docs/dataplane.md ("Security model") gives
// each rule and its reason.
//
// # HTTP
//
// A connection detected as HTTP is served request by request, outbound and
// inbound, by the proxy's own strict HTTP/1 server (package internal/h1) or Go's
// HTTP/2 server with explicit limits and a per-connection guard against
// reset, control-frame, empty-frame and CONTINUATION floods.
//
// Outbound, each request is routed (package route) by the destination's
// profile or outbound policy, sent to a backend picked by weight and an
// endpoint picked by power of two choices over peak-EWMA latency with
// failure accrual (package balance), and retried within the destination's
// budget (package retry) when its route allows it, its method is
// idempotent (or the route names it) and its body fits in 64 KiB. A
// meshed endpoint is reached over mutual TLS: an HTTP/1 request as
// HTTP/1.1 on a bounded keep-alive pool (internal/upstream: 128 connections
// per endpoint, at most 64 held by one downstream client, a wait for one
// bounded by HTTPPoolWaitTimeout and then answered 503 pool-timeout), an
// HTTP/2 or gRPC
// request on a pooled HTTP/2 connection (internal/upstream; HTTP/1 too with
// Extras.HTTP1OverH2, its version carried in l5d-orig-proto and restored
// inbound); WebSocket and other upgrades get a connection of their own
// and become a tunnel only after 101 Switching Protocols.
// Without endpoints, or with every endpoint ejected, requests get 503 at
// once.
//
// In the code (internal/outbound, HTTP.Serve), an outbound request reads
// as its steps: select the route; answer here when the route says so (no
// route, a redirect, an injected fault); bound the request by the route's
// timeouts; run attempts within the retry budget; relay the answer. What
// the attempts share is an outboundCall; one try is an outboundAttempt
// with its steps pick, send, redial and cause; and one function,
// outboundAnswer, maps every reason the proxy answers itself (no
// endpoints, a dial failure, a timeout, an upstream reset, an injected
// fault...) to the status, gRPC status and l5d-proxy-error class and
// message. Upgrades pick their endpoint with the same step and answer
// through the same function. The destination's routes, budget and
// backends it reads are internal/meshstate's (a Service); the pools it
// sends on are internal/upstream's, wired with the proxy's dials by
// internal/l4 (httpRuntime.toEndpoint).
//
// Inbound, every request is authorized with the shared evaluator
// (mesh/policy/authz) on the normalized path it then forwards: a denied
// request gets 403 (404 without a route, 400 for an ambiguous path or
// header) or, for gRPC, PERMISSION_DENIED, with weft-deny-reason naming
// the class; audit policies let requests through and count them. An
// admitted request past the Server's HTTPLocalRateLimitPolicy gets 429
// (gRPC RESOURCE_EXHAUSTED) with Linkerd's l5d-proxy-error message
// (internal/inbound). The
// application receives the verified client identity in l5d-client-id;
// every other l5d-* and weft-* header from a client is removed at each
// hop, as are hop-by-hop headers and every header a Connection field
// names, in requests and responses, 1xx included.
//
// In the code (internal/inbound), an inbound request reads as its steps
// too: refuse CONNECT; authorize (the port's policy, then its rate
// limit); prepare the header the application sees; send, or upgrade on
// a connection of its own; relay the answer. The steps share an
// inboundCall and return causes; one function, inboundAnswer, maps each
// cause (a denial, a rate limit, an unreachable application, a client
// gone...) to the answer.
//
// Settings Linkerd's annotations turn on (Config.Extras): an access log of
// inbound HTTP requests in Linkerd's apache or json format, written to the
// writer given with [WithAccessLog]; ports that refuse clients without a
// mesh identity whatever the policy says; connect and detection timeouts
// per direction; the outbound discovery idle timeout; and a CPU ratio that
// cmd/weft-proxy turns into GOMAXPROCS with [WorkerLimit].
//
// # Hot path
//
// Each proxied connection costs at most two goroutines while bytes move,
// both started fresh once the connection is set up so that the stack grown
// by detection and the handshake is released. Copy buffers are pooled
// (32 KiB) and held only while bytes flow: a plaintext socket is polled
// with a zero-copy MSG_PEEK before a buffer is taken, and a TLS stream
// waits in a one-byte read and gives its buffer back after a second without
// data. On Linux an opaque connection's direction that has had no data for
// a second parks in an epoll set of the proxy's own (one per Run, one
// goroutine in epoll_wait): its goroutine exits and the set starts a new
// one when the socket is readable, so an idle connection holds no goroutine
// and no buffer. Byte counters are bound once per connection.
//
// # Metrics
//
// /metrics serves the traffic series under Linkerd's names and labels, so
// that Linkerd's dashboards and queries read them unchanged:
//
//	request_total, response_total, response_latency_ms    per endpoint (outbound, per attempt) or per admitted request (inbound)
//	route_request_total, route_response_total, route_response_latency_ms, route_retryable_total
//	tcp_open_total, tcp_close_total, tcp_open_connections, tcp_read_bytes_total, tcp_write_bytes_total, tcp_connection_duration_ms
//	inbound_http_authz_allow_total, inbound_http_authz_deny_total, inbound_http_route_not_found_total
//	inbound_http_local_ratelimit_total                    requests a Server's HTTPLocalRateLimitPolicy refused (429)
//	inbound_tcp_authz_allow_total, inbound_tcp_authz_deny_total
//	outbound_tcp_route_open_total, outbound_tcp_route_close_total   connections on a TCPRoute or built-in opaque route
//	outbound_tls_route_open_total, outbound_tls_route_close_total   connections on a TLSRoute
//	identity_cert_expiration_timestamp_seconds
//
// with Linkerd's labels: direction, authority, target_addr/target_ip/
// target_port, tls with client_id, server_id or no_tls_reason, the dst_*
// labels of the endpoint's discovery metric labels, srv_*/route_*/authz_*
// of inbound policy, parent_*/route_* of an outbound TCP or TLS route
// (internal/l4), ratelimit_* of a rate limit, status_code,
// classification, grpc_status, error, and peer (src or dst) on transport
// series; the route_* series carry dst (the
// called Service's name, which discovery confirmed), rt_route (the
// ServiceProfile or policy route) and, on responses, tls (internal/meshstate).
// Weft's own series sit beside them:
// inbound_http_authz_audit_total, outbound_http_retries_total,
// outbound_http_retry_budget_exhausted_total, http_errors_total,
// http_protocol_errors_total, inbound_policy_refused_total,
// metrics_label_sets_overflow_total, and tcp_refused_total (connections
// refused before any policy applied, by direction and reason, a fixed
// set). docs/metrics.md lists every label.
//
// The Linkerd-named series live in a store of their own (internal/metricstore;
// requests are recorded into them by internal/reqmetrics):
// each series is exported with exactly its labels, the data path adds to
// series it resolved once per endpoint, route or policy route (no label
// hashing, no allocation per request), series idle for ten minutes are
// dropped, and at most 20,000 label sets are kept. No label is taken from
// a raw Host, path or header.
//
// # Tap
//
// With Config.TapIdentities set, Run serves io.linkerd.proxy.tap.Tap on
// Listeners.Tap (port 4190) over mutual TLS: only callers whose verified
// identity is in the list may Observe. Identity comes before resources: a
// connection holds one of the listener's 64 slots only once its handshake
// (bounded by TapHandshakeTimeout, 16 at once, 4 per client address)
// showed an accepted tapper; any other client is closed right after its
// handshake (tcp_refused_total{direction="tap"}). A tap's match (source, destination,
// labels, route, scheme, method, authority, path) is compiled once; the
// requests it takes are reported as request-init, response-init and
// response-end events (latencies, status, gRPC status or reset code, body
// bytes, headers when asked for). Requests pay one atomic load while no
// tap is open; with taps open, matching allocates nothing, and a request
// is built into events only when a tap's events-per-second budget admits
// it. Events reach a tap's stream through a bounded buffer, are dropped
// and counted beyond the buffer or the budget (tap_events_dropped_total),
// never waited for, and are encoded and sent, in batches of up to 50 ms
// or 256 events, on the tap's goroutine.
//
// # Tracing
//
// With [WithTracer] (mesh/dataplane/tracing/otlpexport's Tracer in
// weft-proxy), an HTTP request or gRPC call carrying a W3C or B3 trace
// context gets the proxy's span, a client span outbound and a server span
// inbound, and goes on with that span as its parent (internal/l4; the
// parser and the seam are internal/trace). A request without a context is
// not traced. Without a tracer each request pays one nil check. See
// docs/tracing.md.
//
// # Faults
//
// A destination whose watch breaks keeps its last endpoints and is watched
// again with backoff; a new lookup that gets no answer within
// ResolveTimeout fails the connection. A port whose policy watch breaks
// keeps its last policy; a port with no policy yet waits PolicyTimeout and
// is then denied (fail closed). The certificate in hand is used until it
// expires; after that the proxy is not ready and dials no mesh TLS.
package dataplane
