package balance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
)

// BenchmarkPickDone is one request's cost in the balancer (Pick, then
// DoneWith) over 16 endpoints, with each estimator and breaker. The
// baseline is plain peak EWMA without failure accrual.
func BenchmarkPickDone(b *testing.B) {
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.0.%d:8080", i)
	}
	outcomes := []balance.Outcome{{}, {}, {}, {Failure: true, Hint: balance.HintServerError}, {Hint: balance.HintRateLimited, RetryAfter: time.Second, HasRetryAfter: true}}
	for _, c := range []struct {
		name string
		o    balance.Options
	}{
		{"plain", balance.Options{}},
		{"consecutive", balance.Options{Accrual: &balance.Accrual{MaxFailures: 1 << 20}}},
		{"unified", balance.Options{Accrual: &balance.Accrual{Unified: true, MaxFailures: 1 << 20, SuccessRate: 0.01, MinRequests: 1 << 20}}},
		{"unified+penalty", balance.Options{Accrual: &balance.Accrual{Unified: true, MaxFailures: 1 << 20, SuccessRate: 0.01, MinRequests: 1 << 20}, Penalty: &balance.Penalty{}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			bal := balance.New[string](c.o)
			bal.Update(items(keys...))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				h, err := bal.Pick()
				if err != nil {
					b.Fatal(err)
				}
				h.DoneWith(outcomes[i%len(outcomes)])
				i++
			}
		})
	}
}
