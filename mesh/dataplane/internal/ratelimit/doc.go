// Package ratelimit is the inbound proxy's local HTTP rate limiter: the
// enforcement of a Server's HTTPLocalRateLimitPolicy (Linkerd's), as the
// Inbound API delivers it (authz.RateLimit, decoded and checked by
// authz.FromProto).
//
//	l, err := ratelimit.New(srv.RateLimit)      // once per policy update
//	d := l.Allow(clientIdentity)                // once per request
//	if !d.Allowed {
//		// answer 429 with d.Reason in l5d-proxy-error (gRPC:
//		// RESOURCE_EXHAUSTED), count d.MetricScope()
//	}
//
// # Semantics (Linkerd's proxy, linkerd2-proxy server-policy)
//
// Each limit is a token bucket that holds at most RequestsPerSecond
// tokens and gains RequestsPerSecond tokens a second; a request takes one
// token, and a full bucket lets a burst of RequestsPerSecond requests
// through at once. A request is checked against the total limit first,
// and the token it takes there stays taken even if a later limit refuses
// the request. Then a client whose identity an override lists is checked
// against that override's bucket, which all the override's identities
// share; any other client against its own per-identity bucket. Clients
// without a mesh identity (identity "") share one per-identity bucket.
//
// Refusals carry Linkerd's messages ("total rate limit exceeded: 35rps",
// "per-identity rate limit exceeded: 5rps", "override rate limit exceeded:
// 10rps"), which the proxy sends in the l5d-proxy-error header of its 429
// answer, and the scope label of Linkerd's counter
// inbound_http_local_ratelimit_total ("total", or "identity" for both the
// per-identity and override limits).
//
// # Cost and memory
//
// Allow does not allocate for a client whose bucket exists: a map lookup
// under a read lock and a compare-and-swap on the bucket's one word of
// state (a GCRA "theoretical arrival time", equivalent to the bucket
// above). The first request of a new identity allocates its bucket.
//
// Per-identity buckets are bounded by WithMaxIdentities (default
// DefaultMaxIdentities). A bucket that has refilled completely is the same
// as a new one, so when the table is full the limiter drops every full
// bucket; if none is full, the new identity is checked against one
// overflow bucket, with the per-identity limit, that every identity left
// out shares until buckets refill (the next sweep is due when the first
// one has). A hostile stream of identities therefore holds at most
// WithMaxIdentities buckets plus their identity strings, gets at most one
// per-identity limit's worth of requests through together, and cannot
// take the bucket of an identity that is using it (one whose bucket is
// not full). An identity idle long enough for its bucket to refill may be
// dropped, and then shares the overflow bucket while the table stays full
// of busy identities.
//
// Identities are trusted as given: the proxy passes the identity of the
// client's verified mesh TLS certificate, never a header, so a hostile
// set of identities needs certificates from the mesh's CA.
//
// The clock is injected (WithClock) so that tests count requests per
// window without sleeping.
package ratelimit
