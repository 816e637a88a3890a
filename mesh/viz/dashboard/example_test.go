package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/dashboard"
)

// twoPods is a viz.Source over two proxies' /metrics: api's proxy counts
// requests it refused from the intruder. viz.Static (admin addresses over
// HTTP), mesh/viz/kubernetes and mesh/viz/local are the real ones.
type twoPods struct{ scrapes atomic.Int64 }

func (s *twoPods) Targets(context.Context) ([]viz.Target, error) {
	return []viz.Target{
		{Namespace: "shop", Pod: "api-0", WorkloadKind: "deployment", Workload: "api", Identity: "api.shop.serviceaccount.identity.weft.cluster.local"},
		{Namespace: "shop", Pod: "intruder-0", WorkloadKind: "deployment", Workload: "intruder", Identity: "intruder.shop.serviceaccount.identity.weft.cluster.local"},
	}, nil
}

func (s *twoPods) Metrics(_ context.Context, t viz.Target) (io.ReadCloser, error) {
	n := s.scrapes.Add(1) // targets may be scraped in parallel
	text := "# TYPE inbound_http_authz_deny_total counter\n"
	if t.Pod == "api-0" {
		text += fmt.Sprintf("inbound_http_authz_deny_total{srv_kind=\"server\",srv_name=\"api\",target_port=\"8080\",tls=\"true\",client_id=\"intruder.shop.serviceaccount.identity.weft.cluster.local\"} %d\n", n)
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

// The dashboard scrapes its source on an interval and serves the page and
// its data as an http.Handler; the caller owns the listener (here
// httptest's, on loopback).
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := dashboard.New(&twoPods{}, dashboard.WithInterval(100*time.Millisecond), dashboard.WithWindow(200*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = d.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()

	// Wait for a frame that saw the refusals (two scrapes make a window).
	for f := d.Latest(); f == nil || len(f.Denials) == 0; f = d.Latest() {
		select {
		case <-ctx.Done():
			fmt.Println("no frame")
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	resp, err := http.Get(srv.URL + "/api/frame")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var frame dashboard.Frame
	_ = json.NewDecoder(resp.Body).Decode(&frame)
	for _, n := range frame.Nodes {
		fmt.Println("node:", n.ID)
	}
	fmt.Println("denied:", frame.Denials[0].Edge, "port", frame.Denials[0].Port)
	// Output:
	// node: shop/api
	// node: shop/intruder
	// denied: shop/intruder->shop/api port 8080
}
