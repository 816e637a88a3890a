// Package watch holds the proxy's caches of its control-plane watches:
//
//   - [Destinations]: one discovery watch per outbound target, shared by
//     every connection to it. [Destinations.Get] starts the watch of a
//     target on first use and waits for its first endpoint set;
//     connections read the current [Set] and choose an endpoint with
//     [Set.Pick] (power of two choices over open connections divided by
//     weight, never one already tried). [Destinations.Fixed] makes a
//     destination with a fixed set and no watch (the proxy's egress
//     destinations). A janitor ([Destinations.Janitor]) drops targets
//     nobody used for the idle timeout.
//   - [Ports]: one inbound policy watch per port, read by every
//     connection to that port.
//
// # What it trusts
//
// The discovery and policy sources are the control plane's, reached
// over the network; they may stall, break, or send bad or huge answers.
// What the caches do then:
//
//   - a source that does not answer: Get waits at most the resolve (or
//     policy) timeout for a target's (port's) first answer, then fails
//     with an error naming it ("dataplane: resolving T: no answer within
//     D", "dataplane: no policy for port P within D"); the watch goes on,
//     so a later connection may find the answer there;
//   - a first answer that is an error: the target is forgotten, so that
//     the next connection asks again, and Get returns the error wrapped
//     ("dataplane: resolving T: ..."); for a port, an error wrapping the
//     NotFound setting gives the default policy;
//   - a watch that breaks after its first answer: the last endpoint set
//     (policy) stays and the watch is asked again after a backoff from
//     50 ms doubling up to 10 s, each wait jittered between half and all
//     of it ([Jitter]), so that proxies that lost the same control plane
//     do not come back all at once;
//   - an empty endpoint set is kept as it is: the caller answers that the
//     target has no endpoints; a new set keeps the open-connection counts
//     of the endpoints it shares with the last one (by address);
//   - a policy the proxy's Read refuses is not applied: the last good one
//     stays, or, before any, the port gets what Refuse returns (the proxy
//     denies everything);
//   - bounds: a destination lives while it has users and for the idle
//     timeout after its last one, so the cache holds the targets in use
//     (how many is bounded by the connections the proxy accepts); at most
//     [MaxPorts] ports have a policy watch; an endpoint set is as large as
//     the source sends (its decoder bounds the message), and Pick's work
//     is linear in it.
//
// # Seams
//
// The caches know nothing of the proxy: each is given its source as a
// one-method interface ([Resolver], [Policies]; the proxy's
// dataplane.Resolver and dataplane.InboundPolicies satisfy them), the
// context its watches run under, its timeouts and a logger, in
// [DestinationSettings] and [PortSettings]. The policy cache is generic
// in the state it keeps per port: the proxy's Read compiles a policy
// into that state and its Refuse counts a refusal, so this package does
// not link the inbound HTTP side. A destination carries the caller's own
// state as its Ext field, of the cache's type parameter: the proxy hangs
// its outbound HTTP service and egress fields there, types this package
// does not know. Errors keep the "dataplane:" prefix of the package they
// came from: their text reaches the proxy's logs and CONNECT answers
// unchanged.
package watch
