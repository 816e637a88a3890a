// Package meshstate is what the proxy holds of the control plane's
// answers, built from the proxy's sources by [New]:
//
//   - the destinations it connects to ([State.Destinations], the
//     discovery cache of internal/watch), each carrying its outbound
//     state as an [Ext]: a [Service] made on first use
//     ([State.Service]) with the router compiled from the target's
//     outbound policy and ServiceProfile, its retry budget, its backends
//     (each a request balancer over a destination's endpoints), its
//     request series and its compiled stream routes (TLSRoutes and
//     TCPRoutes);
//   - egress destinations ([State.EgressDest]): an address no Service
//     has, under an EgressNetwork's policy;
//   - the inbound policy of each port ([State.Ports], compiled by the
//     shared evaluator, with the port's rate limits);
//   - the profiles of the Services peer proxies name in
//     l5d-dst-canonical ([State.InboundRoute]), for the inbound route
//     series.
//
// internal/outbound reads a Service as its outboundhttp.Service; the
// proxy's L4 paths read the destinations, the port policies, the stream
// routes and the egress decisions.
//
// # What it trusts
//
// The sources are the control plane's, reached over the network: they
// may stall, break, or send answers the proxy cannot read.
//
//   - A target's first policy and profile are awaited for at most the
//     resolve timeout; past it the Service routes by default
//     (route.Default) and takes the answers when they come.
//   - A watch that breaks keeps the last answer and is asked again with
//     backoff (at most 10 s, jittered); a source that knows nothing of a
//     target (an error wrapping Settings.NotFound) publishes "none", and
//     is asked again after 5 s.
//   - An outbound policy or profile the router cannot compile is not
//     applied: the last good router stays. An EgressNetwork policy that
//     cannot be read refuses the connection (EgressDest's error) rather
//     than forward it under another router.
//   - An inbound policy the evaluator refuses is not applied and is
//     counted; a port with no good policy yet denies everything.
//   - Peers choose the names in l5d-dst-canonical: only names of the
//     form NAME.NAMESPACE.svc.DOMAIN:PORT are followed, at most
//     maxInboundProfiles (128) of them for the proxy's lifetime, and a
//     name is believed only when discovery says it is that Service's.
//   - A Service keeps at most maxBackends (64) backends; the request
//     series are bounded by internal/reqmetrics' caches and the label
//     budgets of internal/connmetrics.
package meshstate
