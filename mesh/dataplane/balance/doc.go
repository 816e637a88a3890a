// Package balance chooses an endpoint for each request: power of two
// choices over a peak-sensitive moving average of latency (peak EWMA),
// with failure accrual that takes endpoints out after consecutive
// failures and lets one probe through once their penalty is over.
//
// It is the request-level balancer of the proxy's HTTP and gRPC traffic,
// and a pure core: time comes from an injected clock and randomness from
// an injected source, so its behaviour can be tested step by step.
//
//	b := balance.New[*conn](balance.Options{Accrual: &balance.Accrual{MaxFailures: 7}})
//	b.Update([]balance.Item[*conn]{{Key: "10.0.0.1:80", Weight: 1, Value: c1}, ...})
//	h, err := b.Pick()            // ErrNoEndpoints, ErrUnavailable
//	resp, err := send(h.Value())
//	h.Done(err == nil && resp.StatusCode < 500)
//	// or, telling the breaker and the penalised estimator more:
//	// h.DoneWith(balance.Outcome{Failure: failed, Hint: balance.Classify(resp.StatusCode, grpcStatus),
//	//	RetryAfter: d, HasRetryAfter: ok})
//
// # Load
//
// Each endpoint keeps a latency estimate (the cost). A sample above the
// cost replaces it at once (the peak); a sample below pulls it down with
// weight 1-exp(-elapsed/decay), and without samples the cost decays
// towards zero so that idle endpoints are tried again. An endpoint's load
// is cost * (pending + 1) / weight; an endpoint with requests in flight
// and no estimate yet gets a large penalty. Pick draws two different
// endpoints at random and takes the one with the lower load.
//
// With Options.Penalty the estimate is penalised peak EWMA (Linkerd's
// PenaltyPeakEwma): a response that DoneWith reports with a Hint (Classify:
// 429, 503, other 5xx, or their gRPC equivalents) counts as a request that
// took the penalty (default 5s), or, for 429 and 503, the server's
// Retry-After when that is longer (cut to MaxRetryAfter), and never less
// than the current estimate. Power of two choices then turns away from an
// endpoint that fails or sheds load until the penalty decays.
//
// # Failure accrual
//
// With Options.Accrual set, an endpoint is ejected when its breaker trips,
// for a backoff that starts at MinBackoff and doubles up to MaxBackoff,
// plus up to Jitter of itself at random. The consecutive breaker trips
// after MaxFailures failures in a row. The unified breaker (Accrual.Unified,
// Linkerd's) trips on that run (MaxFailures zero turns it off) or when the
// success rate over a sliding Window falls below SuccessRate once the
// window holds MinRequests responses; rate-limited responses (429, gRPC
// RESOURCE_EXHAUSTED) count against the rate but not the run. When the
// backoff is over the endpoint is on probation: exactly one request (the
// probe) may go to it; success restores it, resets the backoff and empties
// its window (a rate-limited answer is no success for the unified
// breaker); failure ejects it again for the next, longer backoff. With
// RespectRetryAfter, a Retry-After hint on the response that trips the
// breaker is the length of the ejection, kept between MinBackoff and
// MaxBackoff. MinReady keeps that many endpoints in the balancer whatever
// their breakers say. While every endpoint is ejected, Pick fails at once
// with ErrUnavailable (the caller answers 503 fast).
package balance
