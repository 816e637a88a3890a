// Package routematch is the one route matcher of Weft: the outbound router
// (package mesh/dataplane/route) and the inbound authorization evaluator
// (package mesh/policy/authz) both decide with it which HTTPRoute or
// GRPCRoute rule a request falls under, so a route that wins on the way
// out also wins on the way in.
//
// It holds the match model ([Host], [Path], [Value], [HTTP], [GRPC]),
// a per-request [Matcher] that tests a request against it, and the
// precedence between matches ([Rank]). It imports only the standard
// library.
//
// # What it trusts
//
// Route definitions come from the control plane and are trusted to be
// what the operator wrote; the callers validate them before they reach
// this package (regular expressions compiled and anchored at both ends,
// names present, paths in normalized form on the inbound side). Request
// values (method, path, query, authority, headers) come from any peer and
// are trusted for nothing: every comparison is bounded by the request's
// own size, a malformed query or gRPC path is a non-match (or ambiguous,
// see [EveryValue]), never a panic, and selecting a route allocates
// nothing unless a rule matches on query parameters.
//
// # Precedence
//
// Among the rules of all routes whose hosts accept the request, the most
// specific match wins, compared in this order (Gateway API HTTPRoute and
// GRPCRoute precedence as Linkerd's proxy computes it, linkerd/http/route
// at release/v2.366.0):
//
//  1. Host: a route that lists hosts and matches beats one that lists
//     none; an exact host beats a wildcard; a longer wildcard suffix
//     beats a shorter one. Hosts compare case-insensitively and ignore a
//     port and a trailing dot.
//  2. Path, by the length Linkerd gives it: an exact match counts the
//     path's length, a regular expression (which must match the whole
//     path) counts the request path's length, a prefix counts its own
//     length without a trailing slash ("/" counts 1). A match without a
//     path condition is a prefix "/". At equal length an exact match
//     beats a regex, which beats a prefix (Linkerd keeps the first
//     listed there; the Gateway API requires exact over prefix).
//  3. gRPC only: the length of the matched service name, then of the
//     matched method name (so service and method beat service alone,
//     which beats method alone, which beats neither).
//  4. A method condition (the Gateway API's order; Linkerd compares the
//     method last, after the query parameters).
//  5. The number of header conditions.
//  6. The number of query parameter conditions.
//  7. Otherwise the first listed route, then the first listed rule and
//     match, wins; the control plane lists routes oldest first.
//
// A rule without matches matches every request with the rank of a prefix
// "/" (HTTP) or of an empty gRPC match. A gRPC match (even an empty one)
// holds only for a POST whose path has the form /service/method.
package routematch
