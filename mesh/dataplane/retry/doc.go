// Package retry holds the pure parts of the proxy's retries: the retry
// budget that bounds how many retries a destination may see, and the
// rules that decide whether a request may be retried at all.
//
// A Budget follows Linkerd's ServiceProfile retry budget: over a sliding
// window of TTL, retries may be at most Ratio times the requests plus
// MinPerSecond per second of the window. Under a full outage every request
// fails, and the budget caps the extra load retries add at Ratio instead
// of multiplying it by the number of attempts.
//
//	b := retry.NewBudget(retry.BudgetOptions{Ratio: 0.2, MinPerSecond: 10, TTL: 10 * time.Second})
//	b.Deposit()              // once per original request
//	if b.Withdraw() { retry } // once per retry
//
// Backoff is the wait before each retry, jittered exponential; with
// RespectRetryAfter (ExponentialBackoff.respect_retry_after_hint in the
// outbound policy) the server's own hint replaces it, kept within the
// backoff's bounds. RetryAfter reads that hint from a 429 or 503 response
// (delay-seconds or an HTTP-date) and GRPCPushback from a gRPC response.
//
//	d, ok := retry.RetryAfter(resp.StatusCode, resp.Header, now)
//	wait := retry.Backoff{Min: min, Max: max, RespectRetryAfter: true}.Delay(n, d, ok, nil)
package retry
