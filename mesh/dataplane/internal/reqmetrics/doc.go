// Package reqmetrics records the proxy's HTTP requests in Linkerd's
// request-level families: request_total, response_total and
// response_latency_ms per endpoint, route_request_total,
// route_response_total, route_response_latency_ms and
// route_retryable_total per route, and the inbound authorization counters
// (inbound_http_authz_allow_total, _deny_total, _audit_total,
// inbound_http_route_not_found_total), all in the proxy's metric store
// (internal/metricstore); beside them Weft's own client_golang counters of
// retries, spent retry budgets, answers the proxy made itself
// (http_errors_total) and protocol errors.
//
// What it owns: the families ([HTTP], [New]); a label set's series at one
// level ([Series]: its request counter, and its latency histograms and
// response counters resolved on first use and cached); the recording of
// one request ([Stats], on the handler's stack: Begin on the route's
// series, Attempt on each endpoint's, Head at the response head, Done at
// the end, AttemptEnded for an attempt that is retried); the copy-on-write
// [Cache] the proxy keeps its resolved series in, and the [LabelBudget]
// that caps the distinct authorities.
//
// What it trusts: label values are the caller's, from bounded sources
// (discovery, policy, verified certificates, fixed enumerations); response
// status codes and grpc-status values come from the upstream and are
// bounded here (a status outside 100..599 has no status_code label, a
// grpc-status that is not a code of at most two digits counts as a
// failure), so a hostile upstream cannot grow the label sets.
// Authorities, which come from clients, are capped by a [LabelBudget]
// (past [MaxTargetLabels] distinct values, "overflow").
//
// Cost: recording a request on series already resolved adds to atomic
// counters and allocates nothing (TestRecordingARequestOnResolvedSeriesDoesNotAllocate);
// the data path calls concrete methods, no interface.
//
// It imports the metric store and client_golang, nothing else of the
// proxy: the dataplane package resolves the series (which labels a request
// gets is its business) and this package records into them.
package reqmetrics
