package viz_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
)

// Two scrapes of a proxy's /metrics, ten seconds apart, make a window;
// Stat turns it into what `weft viz stat` prints.
func ExampleStat() {
	web := viz.Target{Namespace: "shop", Pod: "web-0", WorkloadKind: "deployment", Workload: "web"}
	metrics := func(ok, failed int) string {
		return fmt.Sprintf(`# TYPE response_total counter
response_total{direction="inbound",tls="true",client_id="gw.shop.serviceaccount.identity.weft.cluster.local",classification="success"} %d
response_total{direction="inbound",tls="true",client_id="gw.shop.serviceaccount.identity.weft.cluster.local",classification="failure"} %d
`, ok, failed)
	}
	t0 := time.Unix(0, 0)
	before, _ := viz.ParseMetrics(strings.NewReader(metrics(100, 0)), web, t0)
	after, _ := viz.ParseMetrics(strings.NewReader(metrics(195, 5)), web, t0.Add(10*time.Second))
	w := viz.NewWindow(map[string]*viz.Scrape{web.Key(): before}, map[string]*viz.Scrape{web.Key(): after}, nil)
	for _, row := range viz.Stat(w, viz.Resource{Kind: viz.KindWorkload, Namespace: "shop"}) {
		fmt.Printf("%s: %.0f requests, %.1f rps, %.0f%% success, %.0f%% mTLS\n", row.Name, row.Requests(), row.RPS(w.Duration), 100*row.SuccessRate(), 100*row.MTLSShare())
	}
	// Output:
	// web: 100 requests, 10.0 rps, 95% success, 100% mTLS
}
