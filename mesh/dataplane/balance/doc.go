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
// # Failure accrual
//
// With Options.Accrual set, an endpoint that fails MaxFailures times in a
// row is ejected for a backoff that starts at MinBackoff and doubles up to
// MaxBackoff, plus up to Jitter of itself at random. When the backoff is
// over the endpoint is on probation: exactly one request (the probe) may
// go to it; success restores it and resets the backoff, failure ejects it
// again for the next, longer backoff. While every endpoint is ejected,
// Pick fails at once with ErrUnavailable (the caller answers 503 fast).
package balance
