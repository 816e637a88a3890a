// Package viz turns what Weft's proxies report into answers for people:
// golden metrics per namespace, workload, pod, authority and route (Stat),
// who calls whom with the identities both proxies verified (Edges),
// per-route figures (Routes), what each authorization allowed and denied
// (Authz), and from tap the live request stream and the hottest paths
// (Event, Top). It is what `weft viz` and the web dashboard
// (mesh/viz/dashboard) call, and it needs no Prometheus.
//
// A newcomer can read it in this order:
//
//  1. Series (series.go): a proxy's /metrics text is parsed into a Scrape
//     (ParseMetrics), with the pod's own labels added (namespace, pod and
//     the workload kind, as Linkerd's Prometheus configuration adds them).
//     Two scrapes of the same targets make a Window (NewWindow, Delta):
//     each counter's increase, each gauge's last value, counter resets
//     handled as Prometheus' increase() does. A Window can equally come
//     from a Prometheus server (package mesh/viz/prometheus), so every
//     view below works on either.
//  2. Views (stat.go, edges.go, routes.go, authz.go): pure functions of a
//     Window. They read Linkerd's metric names and labels (request_total,
//     response_total, response_latency_ms, route_*, tcp_*,
//     inbound_{http,tcp}_authz_{allow,deny}_total with direction,
//     authority, tls, client_id, server_id, classification, dst_*, srv_*,
//     authz_*, route_name, rt_route), so they answer for Linkerd's proxies
//     as well. Latency percentiles come from the histogram buckets with
//     the rules of histogram_quantile (Histogram.Quantile). Routes of a
//     called Service are chosen with a RouteTarget (ParseRouteTarget:
//     svc/NAME, NAME, a fully qualified name, or an address), matched
//     against the dst label the proxies set to the Service's name; those
//     of an EgressNetwork (egressnetwork/NAME) against the parent_* labels
//     the proxies set on the route series of destinations it covers
//     (Edges shows that traffic as an edge of kind KindEgressNetwork).
//  3. Tap (tap.go): Event is a decoded io.linkerd.proxy.tap TapEvent;
//     Top pairs a request's events and ranks paths; Event.Line renders
//     `weft viz tap` lines.
//  4. Sources (source.go): a Source lists the meshed pods (Targets) and
//     reads their /metrics; Static reaches the admin servers of a local
//     mesh directly, mesh/viz/kubernetes goes through the API server's pod
//     proxy. ScrapeAll scrapes every target in parallel under a timeout;
//     Sample takes the two scrapes of a window.
//
// # What it trusts
//
// A proxy's /metrics is input from a peer: a body is cut at
// MaxMetricsBytes and MaxSeriesPerTarget series, and the labels that
// place a series (namespace, pod, workload) are set from the target the
// source listed, never from the text, so a proxy cannot report traffic as
// another pod's. Identities in client_id and server_id are those the
// proxies verified over mutual TLS; viz shows them as reported.
package viz
