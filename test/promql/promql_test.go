package promql_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/local"
)

const mesh = `
namespace: shop
workloads:
- name: api
  replicas: 2
  ports: [{name: http, port: 7000}]
- name: web
  calls: [{service: api, localPort: 9001}]
- name: intruder
  calls: [{service: api, localPort: 9002}]
policies:
- workload: api
  port: http
  allow: [web]
`

// prometheusBinary finds Prometheus; missing, the test skips, or fails
// under CI=true.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WEFT_PROMETHEUS"); p != "" {
		return p
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	msg := "prometheus not found (apt-get install prometheus, or set WEFT_PROMETHEUS)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// apiApp answers HTTP on the pod's port: 200, except /fail which is 500.
func apiApp(ctx context.Context, pod local.Pod) error {
	l, err := net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(pod.Ports[0].Port)).String())
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "hello from "+pod.Name+"\n")
	})}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(l); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// caller sends requests to its first call until ctx ends, at most one
// every few milliseconds, one in ten to /fail; one in twenty closes its
// connection afterwards, so connections open and close as in real traffic.
func caller(ctx context.Context, pod local.Pod) error {
	c := &http.Client{Timeout: 5 * time.Second}
	u := "http://" + pod.Mappings[0].Listen.String()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		path := "/books"
		if i%10 == 9 {
			path = "/fail"
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+path, nil)
		req.Close = i%20 == 19
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// startPrometheus runs Prometheus on a free loopback port with a
// configuration scraping the proxies' admin servers every second.
func startPrometheus(t *testing.T, bin string, proxies []*local.Proxy) string {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: linkerd-proxy\n  metrics_path: /metrics\n  static_configs:\n")
	for _, p := range proxies {
		// The labels Linkerd's scrape configuration adds from the pod.
		fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {namespace: %q, deployment: %q, pod: %q}\n",
			p.Pod.Admin.String(), p.Pod.Namespace, p.Pod.Workload, p.Pod.Name)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600))

	// A free port: listen, note it, close it; Prometheus retries below if
	// something else took it meanwhile.
	for attempt := 0; attempt < 5; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.CommandContext(ctx, bin,
			"--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		var logs lockedBuffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		ready := false
		deadline := time.Now().Add(60 * time.Second)
		for !ready && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				cancel()
				t.Logf("prometheus exited (%v), retrying:\n%s", err, logs.String())
				deadline = time.Time{}
				continue
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := http.Get("http://" + addr + "/-/ready")
			if err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
		if !ready {
			cancel()
			continue
		}
		t.Cleanup(func() {
			cancel()
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				t.Error("prometheus did not stop")
			}
		})
		return addr
	}
	t.Fatal("prometheus did not start")
	return ""
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// query runs an instant PromQL query and returns the number of series in
// the result and their values.
func query(addr, q string) ([]float64, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]json.RawMessage `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, body.Error)
	}
	var out []float64
	for _, r := range body.Data.Result {
		var s string
		if err := json.Unmarshal(r.Value[1], &s); err != nil {
			return nil, err
		}
		var v float64
		fmt.Sscanf(s, "%g", &v)
		out = append(out, v)
	}
	return out, nil
}

// holds reports whether check holds for every value that is a number,
// and at least one is (a series without requests in the window is 0/0).
func holds(vs []float64, check func(float64) bool) bool {
	n := 0
	for _, v := range vs {
		if math.IsNaN(v) {
			continue
		}
		if !check(v) {
			return false
		}
		n++
	}
	return n > 0
}

// labelValues lists the values of a label among the series matching sel.
func labelValues(addr, label, sel string) ([]string, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/label/" + label + "/values?match[]=" + url.QueryEscape(sel))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("label values of %s: %s", label, body.Status)
	}
	return body.Data, nil
}

// dashboards are queries from Linkerd's Grafana dashboards, with their
// variables filled in ($__rate_interval as 30s; 1s scrapes give it
// samples). Each must return at least one series, and check, when set,
// must hold for each value.
var dashboards = []struct {
	from, query string
	check       func(float64) bool
}{
	{"deployment.json SUCCESS RATE",
		`sum(irate(response_total{classification="success", namespace="shop", deployment="api", direction="inbound"}[30s])) / sum(irate(response_total{namespace="shop", deployment="api", direction="inbound"}[30s]))`,
		func(v float64) bool { return v > 0.5 && v < 1 }},
	{"deployment.json REQUEST RATE",
		`sum(irate(request_total{namespace="shop", deployment="api", direction="inbound"}[30s]))`,
		func(v float64) bool { return v > 0 }},
	{"deployment.json INBOUND DEPLOYMENTS",
		`count(count(request_total{dst_namespace="shop", deployment!="", dst_deployment!="", dst_deployment="api", direction="outbound"}) by (namespace, deployment))`,
		func(v float64) bool { return v == 2 }}, // web and intruder
	{"deployment.json OUTBOUND DEPLOYMENTS",
		`count(count(request_total{namespace="shop", deployment="web", direction="outbound"}) by (namespace, dst_deployment))`,
		func(v float64) bool { return v == 1 }},
	{"deployment.json inbound mTLS traffic",
		`sum(irate(request_total{namespace="shop", deployment="api", direction="inbound", tls="true"}[30s])) by (deployment)`,
		func(v float64) bool { return v > 0 }},
	{"deployment.json inbound P95 latency",
		`histogram_quantile(0.95, sum(irate(response_latency_ms_bucket{namespace="shop", deployment="api", direction="inbound"}[30s])) by (le, deployment))`,
		func(v float64) bool { return v > 0 }},
	{"deployment.json outbound success rate by dst_deployment",
		`sum(irate(response_total{classification="success", namespace="shop", deployment="web", direction="outbound"}[30s])) by (dst_deployment) / sum(irate(response_total{namespace="shop", deployment="web", direction="outbound"}[30s])) by (dst_deployment)`,
		func(v float64) bool { return v > 0.5 && v < 1 }},
	{"deployment.json TCP open connections",
		`tcp_open_connections{namespace="shop", deployment="api", direction="inbound"}`, nil},
	{"deployment.json TCP connection duration",
		`tcp_connection_duration_ms_bucket{namespace="shop", deployment="web", direction="outbound"}`, nil},
	{"pod.json outbound success rate by dst_pod",
		`sum(irate(response_total{classification="success", namespace="shop", pod=~"web.*", direction="outbound"}[30s])) by (dst_pod) / sum(irate(response_total{namespace="shop", pod=~"web.*", direction="outbound"}[30s])) by (dst_pod)`,
		func(v float64) bool { return v > 0 && v <= 1 }},
	{"authority.json outbound mTLS requests by deployment",
		`sum(irate(request_total{namespace="shop", authority="api.shop.svc.cluster.local:7000", direction="outbound", tls="true"}[30s])) by (deployment)`,
		func(v float64) bool { return v > 0 }},
	{"route.json outbound route request rate",
		`sum(irate(route_request_total{namespace="shop", direction="outbound", rt_route="$rt_route"}[30s])) by (deployment, rt_route)`,
		func(v float64) bool { return v > 0 }},
	{"route.json outbound route P95 latency",
		`histogram_quantile(0.95, sum(rate(route_response_latency_ms_bucket{namespace="shop", direction="outbound", rt_route="$rt_route"}[30s])) by (le, deployment, rt_route))`,
		func(v float64) bool { return v > 0 }},
	{"top-line.json namespaces",
		`count(count(request_total{namespace=~"shop"}) by (namespace))`,
		func(v float64) bool { return v == 1 }},
	{"top-line.json deployments",
		`count(count(request_total{namespace=~"shop"}) by (namespace, deployment))`,
		func(v float64) bool { return v == 3 }}, // api, web and intruder
}

func TestLinkerdDashboardQueriesReturnDataFromWeftProxies(t *testing.T) {
	bin := prometheusBinary(t)
	f, err := local.Parse("promql.yaml", []byte(mesh))
	require.NoError(t, err)
	r, err := local.New(context.Background(), f,
		local.WithApp("api", apiApp), local.WithApp("web", caller), local.WithApp("intruder", caller))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("mesh did not stop")
		}
	})
	select {
	case <-r.Ready():
	case err := <-done:
		t.Fatalf("mesh stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("mesh not ready within 60s")
	}
	t.Logf("mesh ready")
	addr := startPrometheus(t, bin, r.State().Proxies)
	t.Logf("prometheus ready on %s", addr)

	// Grafana fills route.json's $rt_route from the values Prometheus
	// holds for the label; so does the test.
	var route string
	testutil.Eventually(t, 90*time.Second, func() bool {
		vs, err := labelValues(addr, "rt_route", `route_request_total{namespace="shop", direction="outbound"}`)
		if err == nil && len(vs) > 0 {
			route = vs[0]
		}
		return route != ""
	}, "a route in route_request_total")
	t.Logf("rt_route=%q", route)

	// Each query is asked until it returns data: scrapes arrive each
	// second, and irate needs two samples.
	for _, d := range dashboards {
		t.Run(d.from, func(t *testing.T) {
			q := strings.ReplaceAll(d.query, "$rt_route", route)
			var got []float64
			var lastErr error
			// Data, and values the traffic explains: an instant rate
			// (irate) looks at the last two scrapes only, so a value is
			// asked for again until a window holds what the check needs.
			testutil.Eventually(t, 90*time.Second, func() bool {
				got, lastErr = query(addr, q)
				return lastErr == nil && len(got) > 0 && (d.check == nil || holds(got, d.check))
			}, fmt.Sprintf("data for %s (last: %v, %v)", q, got, lastErr))
		})
	}

	// And the policy denial the intruder meets, by Linkerd's names.
	t.Run("authorization denials by server", func(t *testing.T) {
		testutil.Eventually(t, 60*time.Second, func() bool {
			got, err := query(addr, `sum(increase(inbound_http_authz_deny_total{namespace="shop", deployment="api"}[1m])) by (srv_name)`)
			return err == nil && len(got) == 1 && got[0] > 0
		}, "the intruder's denials, by server")
	})
}
