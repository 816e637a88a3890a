// Package tap is the proxy's side of io.linkerd.proxy.tap: it reports the
// HTTP requests the proxy handles, as they happen, to observers that
// opened a Tap.Observe stream.
//
// What it owns:
//
//   - the hub (hub.go): the open taps, each with its compiled match, its
//     events-per-second budget and a bounded buffer; the data path's
//     calls (Hub.On, Hub.Start, Request.ResponseInit, End), which cost one
//     atomic load per request while no tap is open and allocate nothing
//     when no tap takes the request;
//   - the match (match.go) and the view it is evaluated on (view.go),
//     with the endpoint metadata rendered as Linkerd's proxy reports it;
//   - the event encoding (wire.go), written by hand into a reused buffer
//     and checked against the generated messages by the tests;
//   - the server (server.go, gate.go, stream.go): Hub.Serve runs the tap
//     listener's HTTP/2 server behind a gate that admits only accepted
//     tappers, and answers Observe as grpc-go's server would.
//
// What it trusts: the caller's ServerConfig (its TLS configuration
// verifies client certificates against the mesh roots; Identity reads a
// verified connection's identity) and the View the data path builds
// (addresses, the endpoint discovery gave, the policy decision). It
// trusts nothing from the tapper: a client is admitted only with an
// identity in ServerConfig.Identities, the handshake stage, connection
// slots, streams, open taps, request size and match depth are bounded,
// and a slow reader loses events (counted in tap_events_dropped_total)
// rather than slowing a request.
//
// It imports nothing of the dataplane package, which builds the views
// (tapOutbound, tapInbound) and wires the server (serveTap).
package tap
