// Package connmetrics holds the proxy's Prometheus series ([Set]): its
// metric store (internal/metricstore), with the request series of
// internal/reqmetrics in it, and the connection-level series, named as
// Linkerd's proxy names them:
//
//   - tcp_open_total, tcp_close_total (with errno and classification),
//     tcp_open_connections, tcp_read_bytes_total, tcp_write_bytes_total
//     and tcp_connection_duration_ms, per kind of connection: the label
//     sets [InboundSrc], [App], [OutboundSrc] and [OutboundDst];
//   - inbound_tcp_authz_allow_total and inbound_tcp_authz_deny_total
//     ([Set.AuthzTCP]);
//   - outbound_tcp_route_* and outbound_tls_route_*, whose families the
//     connection paths (internal/l4) count route connections on;
//   - Weft's extras: tcp_refused_total by direction and reason
//     ([Set.Refuse]), inbound_policy_refused_total,
//     identity_cert_expiration_timestamp_seconds and
//     metrics_label_sets_overflow_total.
//
// A connection's series are resolved once, when it opens ([Set.Opened]
// returns a [Conn]); its bytes are counted by [Counted] (a connection the
// proxy accepted, closed by its owner), by [Dialed] (one the proxy
// opened, from [Set.Dial]: its Close counts the end) or, on the relay,
// by [Both] (the bytes one side reads are the bytes the other writes).
// Closed counts the end once, with the first error recorded by Fail as
// its errno label.
//
// # What it trusts
//
// Label values come from the proxy's own state: the direction and
// refusal reasons are fixed sets given by the caller, identities are
// verified ones, and discovery's endpoint labels pass through
// metricstore's fixed list of keys. The store bounds how many label sets
// it holds (metrics_label_sets_overflow_total counts the rest).
//
// # Seams
//
// [New] is given the registry and the proxy's certificate source; it
// registers every collector and returns the error of the first one the
// registry refuses (a name already registered). [RegisterRuntime] adds the Go and
// process collectors to a registry the proxy made itself. The dataplane
// package holds the Set (proxy.go) and chooses the labels; this package
// links neither it nor either direction's HTTP side.
package connmetrics
