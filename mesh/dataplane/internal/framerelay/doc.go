// Package framerelay ends a call the proxy relays: it sends the
// upstream's response to the client and records how the exchange ended,
// the same way for both directions. Relay ends a gRPC call relayed at
// frame level (the frame path of internal/inbound and
// internal/outbound); RelayResponse ends a request on the http.Handler
// path, with the same classification, series and tap events.
//
// It trusts neither end: the response's fields are cleaned by the
// direction's own rule before they are sent (mesh and hop-by-hop
// fields out, a route's response filters applied), a body the upstream
// breaks resets the client's stream, and a client that goes away ends
// the copy. The series, the response class and the tap events are
// those the http.Handler path records for the same exchange; the
// exchange is recorded before the response's last block is written, as
// that path's ResponseWriter ends the stream only after its handler
// returns.
package framerelay
