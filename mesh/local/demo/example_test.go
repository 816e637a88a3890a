package demo_test

import (
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/local/demo"
)

func ExampleRenderLines() {
	f := demo.Frame{Elapsed: 2 * time.Second, Rows: []demo.Row{{
		Figures: demo.Figures{Workload: "backend", Requests: 50, Succeeded: 50, RPS: 25, SuccessRate: 1, P50: 300 * time.Microsecond, P99: 2 * time.Millisecond},
		Proxy:   demo.ProxyFigures{Allowed: 50, Denied: 3, From: []string{"frontend.demo.serviceaccount.identity.weft.cluster.local"}},
	}}}
	fmt.Print(demo.RenderLines(f))
	// Output:
	// t=2.0s workload=backend rps=25.0 success=100.0% p50=300µs p99=2.0ms requests=50 denied=0 authz_allow=50 authz_deny=3 peers="<-frontend.demo"
}
