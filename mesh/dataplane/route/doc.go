// Package route turns what the control plane says about an outbound
// destination into routing decisions for each request. It reads the proxy
// API's own messages, the OutboundPolicy (Gateway API style HTTPRoute and
// GRPCRoute rules: matches, filters, weighted backends, timeouts, retries,
// failure accrual) and the DestinationProfile of a ServiceProfile
// (per-route retryability, timeouts, response classes, retry budget,
// traffic-split overrides), and compiles them into a [Router].
//
// [Compile] is strict in the same way as the inbound evaluator: a policy
// with an invalid regular expression, a match without a value or a filter
// it does not know is an error, and the proxy keeps its last good router
// instead. [Router.Select] is a pure function of the request.
//
//	r, err := route.Compile(policy, profile, "web.shop.svc.cluster.local:80")
//	rt := r.Select(route.Request{Method: "GET", Path: "/api", Host: host, Header: h})
//	// rt.Backends, rt.Timeouts, rt.Retry, rt.Redirect, rt.RequestHeaders ...
//
// # Precedence
//
// A profile with routes or traffic-split overrides is used in preference
// to the outbound policy, as Linkerd does. Otherwise the policy's routes
// for the request's protocol apply (for protocol detection, the HTTP/1 or
// HTTP/2 set; for gRPC, the GRPCRoutes). Among matching rules the most
// specific wins, by the precedence of package mesh/internal/routematch,
// which the inbound evaluator (mesh/policy/authz) shares: host (exact
// over wildcard, longer wildcards first), then the path's length as
// Linkerd's proxy counts it (exact and regex: the request path's; prefix:
// its own; at equal length exact, regex, prefix), for gRPC the service
// then the method, then a method condition, the number of header
// matches, the number of query matches, then order. A header sent more
// than once matches when any of its values does. Without any route the
// request goes to the destination itself (route "default").
//
// # Whole connections
//
// [CompileStream] reads the routes of whole connections, Gateway API
// TLSRoutes (the Tls protocol: [Stream.Select] picks a route by the SNI of
// the ClientHello, an exact name over the longest `*.` suffix over a
// route without names) and a TCPRoute (an Opaque protocol whose route is a
// resource: it takes every connection); [StreamRoute.Pick] chooses a
// backend by weight. It is strict too: a filter, backend or SNI match it
// does not know is an error, and the proxy refuses the connection.
package route
