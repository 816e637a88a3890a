package prometheus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/weftmesh/weft/mesh/viz/prometheus"
)

// Query runs an instant PromQL query through Prometheus's HTTP API. Here
// a loopback stand-in answers the way the query API does; point New at
// your Prometheus (http://prometheus.linkerd-viz:9090) instead.
func ExampleClient_Query() {
	stand := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		fmt.Println("asked:", r.URL.Path, r.Form.Get("query"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[`+
			`{"metric":{"__name__":"response_total","deployment":"web","classification":"success"},"value":[1767225600,"42"]}]}}`)
	}))
	defer stand.Close()

	c, err := prometheus.New(stand.URL, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	series, err := c.Query(ctx, `response_total{deployment="web"}`, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range series {
		fmt.Println(s.Labels["deployment"], s.Labels["classification"], s.Value)
	}
	_, err = prometheus.New("prometheus:9090", nil)
	fmt.Println(err)
	// Output:
	// asked: /api/v1/query response_total{deployment="web"}
	// web success 42
	// prometheus: "prometheus:9090" is not an http(s) URL
}
