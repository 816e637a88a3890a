// Package metricstore holds the proxy's Linkerd-named series
// (request_total, response_total, response_latency_ms, route_*, tcp_*,
// inbound_*_authz_*) in a store of their own rather than in client_golang
// vectors, for three reasons:
//
//   - Linkerd's label sets differ within one family (an inbound series has
//     client_id and srv_*, an outbound one server_id and dst_*; a plaintext
//     one no_tls_reason instead of an identity), and Linkerd's dashboards
//     and tools read them that way. The store emits each series with
//     exactly its own labels.
//   - The data path works on series it resolved once (per endpoint, per
//     connection, per policy route): a request adds to atomic counters and
//     never hashes label values.
//   - Series nobody has used for ten minutes (Linkerd's retain-idle
//     period) are dropped, as Linkerd does, so endpoint churn does not
//     grow the proxy forever; and the number of label sets is capped as a
//     last resort, past which new label sets share one overflow group per
//     direction.
//
// A [Group] is the unit of lifetime: the series that share one base label
// set (one endpoint, one connection class, one policy route) appear and
// disappear together. Holders keep *Group pointers in caches and resolve
// again one that is no longer [Group.Alive]; an open connection [Group.Pin]s
// its group so that it outlives any idle period.
//
// What it owns: the series, their lifetime and their export as a
// prometheus.Collector ([Store] is one, unchecked, because label sets vary
// within a family). The label builders (labels.go) turn discovery, policy
// and identity values into Linkerd's label names.
//
// What it trusts: label values are the caller's and come from bounded
// sources (discovery, policy objects, verified certificates, fixed
// enumerations), never from a raw Host, path or header (Linkerd
// CVE-2025-43915). It still makes every value valid UTF-8 and at most
// [MaxLabelValue] bytes ([LabelValue]), keeps only the discovery label
// keys Linkerd's destination service sends ([Dst]), and caps the number of
// label sets, so a broken or hostile control plane costs bounded memory
// and never breaks a scrape.
//
// It imports nothing of the proxy: the dataplane package and its other
// internal packages build on it.
package metricstore
