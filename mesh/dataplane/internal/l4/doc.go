// Package l4 is the proxy's connection paths: what happens to each
// connection its listeners accept, in both directions, until its bytes
// are relayed (internal/relay) or its requests served by the HTTP sides
// (internal/inbound, internal/outbound).
//
// The dataplane package builds the [Paths] with [New], from the [Config]
// fields it copies from dataplane.Config and the [Settings] its options
// and sources make, and drives them: [Paths.Accept] serves the inbound,
// outbound (transparent), CONNECT and mapped listeners under the run
// context, and [Paths.Drain] lets the tracked connections finish within
// the shutdown grace period before it closes the rest and the pools.
//
// In the code:
//
//   - inbound.go: accept (mesh TLS or plaintext, the transport header,
//     the original destination), the port checks (the proxy's own
//     ports, skip ports, InboundPortsOnly, required identity), detection
//     and the port's policy, then the relay to the application or
//     HTTP;
//   - outbound.go: the target (original destination, CONNECT authority
//     or mapping), discovery (internal/meshstate), detection, the
//     endpoint's dial (mesh TLS and the transport header to a meshed
//     one), then the relay or HTTP; streams.go: the TLS and TCP routes
//     of a destination's policy, which route whole connections;
//   - http.go and grpcout.go: the HTTP servers and the pools to
//     upstreams both directions share, and the frame path's wiring;
//   - dial.go, own.go: dials within the direction's timeout, the
//     proxy's own ports and the loopback connections it dialled;
//   - relay.go, paths.go: the relay's wiring, accept loops, connection
//     tracking and the drain; trace.go: the proxy's span around a
//     request when tracing is on.
//
// # What it trusts
//
// Every accepted connection's peer may be hostile: an application
// process on the outbound side, anything that can reach the inbound
// port on the other.
//
//   - Detection reads at most a bounded prefix within the direction's
//     detect timeout; a peer that sends nothing, or half an HTTP request,
//     is refused and counted (tcp_refused_total reasons "silent",
//     "incomplete-request").
//   - A transport header (the target port and protocol of a meshed
//     connection) is believed only after mesh TLS verified a client
//     identity, never on a plaintext connection ("no-client-identity");
//     an unreadable one is refused ("transport-header").
//   - Whatever a header or original destination names, the inbound path
//     never forwards to the proxy's own listeners ("own-port"), to
//     inbound skip ports ("skip-port"), or, with InboundPortsOnly, to a
//     port that is not the application's ("not-app-port").
//   - Ports that require identity refuse clients without one; the
//     port's policy (internal/meshstate, mesh/policy/authz) decides the
//     rest, and a policy that cannot be read denies.
//   - Outbound, a destination whose stream routes cannot be read
//     refuses the connection ("unreadable-policy"), and so does an
//     EgressNetwork policy that cannot be read: fail closed, never
//     forwarded under another router.
//   - Each accepted connection is tracked until it ends; a drain past
//     the grace period closes it, parked relay directions included.
package l4
