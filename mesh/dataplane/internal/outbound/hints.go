package outbound

import (
	"net/http"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
)

// responseOutcome is what an upstream response tells the balancer: the
// route's verdict, the response's own hint (429, 503, 5xx and their gRPC
// forms) and the server's Retry-After or gRPC pushback, which the
// penalised estimator, a breaker respecting Retry-After and retries
// respecting it read.
func responseOutcome(status int, gs string, h http.Header, failure bool, now time.Time) balance.Outcome {
	o := balance.Outcome{Failure: failure, Hint: balance.Classify(status, gs)}
	o.RetryAfter, o.HasRetryAfter = retry.RetryAfter(status, h, now)
	if !o.HasRetryAfter && gs != "" {
		o.RetryAfter, o.HasRetryAfter = retry.GRPCPushback(h)
	}
	return o
}
