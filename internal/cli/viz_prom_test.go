package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// startPrometheus runs Debian's Prometheus on loopback, scraping the
// demo's proxies every second with the labels Linkerd's scrape
// configuration adds (namespace, pod, deployment).
func startPrometheus(t *testing.T, p *pacedDemo) string {
	t.Helper()
	var targets []promScrape
	for _, pod := range p.live.State.Plan.Pods {
		targets = append(targets, promScrape{addr: pod.Admin.String(), namespace: pod.Namespace, pod: pod.Name, deployment: pod.Workload})
	}
	return startPrometheusFor(t, targets)
}

// promScrape is a proxy admin address Prometheus scrapes, with the
// labels of its pod.
type promScrape struct {
	addr, namespace, pod, deployment string
}

// startPrometheusFor runs Debian's Prometheus on loopback, scraping the
// targets every second.
func startPrometheusFor(t *testing.T, targets []promScrape) string {
	t.Helper()
	exe, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed (apt-get install prometheus)")
		}
		t.Skip("prometheus is not installed (apt-get install prometheus)")
	}
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: weft-proxy\n  static_configs:\n")
	for _, tg := range targets {
		fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {namespace: %q, pod: %q, deployment: %q}\n", tg.addr, tg.namespace, tg.pod, tg.deployment)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, exe, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logs := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.String())
		}
	})
	url := "http://" + addr
	testutil.Eventually(t, 60*time.Second, func() bool {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "prometheus to be ready")
	return url
}

func TestVizWithPrometheusAgreesWithTheDemosOwnCounters(t *testing.T) {
	p := startPacedDemo(t)
	prom := startPrometheus(t, p)
	const n, m = 30, 5
	p.traffic.Allow(n)
	p.intruder.Allow(m)
	p.waitCounts(t, n, m)
	c := p.counts()
	flags := []string{"-n", "demo", "--prometheus", prom, "-o", "json"}

	// Since start: the counters' current values, exact once scraped.
	var st statJSON
	testutil.Eventually(t, 60*time.Second, func() bool {
		vizJSON(t, &st, append([]string{"stat", "deploy", "--since-start"}, flags...)...)
		ix := st.byName()
		f, ok1 := ix["frontend"]
		b, ok2 := ix["backend"]
		// backend was also sent the intruder's m requests, which its
		// policy denied.
		return ok1 && ok2 && st.Rows[f].Requests == n && st.Rows[b].Requests == n+m && st.Rows[b].Denied == m
	}, "prometheus to have scraped every request")
	ix := st.byName()
	assert.Equal(t, float64(c["frontend"].Succeeded), st.Rows[ix["frontend"]].Successes)
	assert.Zero(t, st.Rows[ix["frontend"]].Denied)
	assert.Equal(t, 1.0, *st.Rows[ix["backend"]].MTLSShare)

	var ed struct {
		Edges []struct {
			Src      struct{ Name string } `json:"src"`
			Dst      struct{ Name string } `json:"dst"`
			ClientID string                `json:"clientId"`
			ServerID string                `json:"serverId"`
			Denied   float64               `json:"denied"`
			Requests float64               `json:"requests"`
		} `json:"edges"`
	}
	// Each proxy is scraped at its own moment: wait until the callers'
	// proxies were scraped after their last request too.
	got := map[string]int{}
	testutil.Eventually(t, 60*time.Second, func() bool {
		vizJSON(t, &ed, append([]string{"edges", "--since-start"}, flags...)...)
		got = map[string]int{}
		for i, e := range ed.Edges {
			got[e.Src.Name+"->"+e.Dst.Name] = i
		}
		i, ok := got["traffic->frontend"]
		return ok && ed.Edges[i].ServerID != "" && len(ed.Edges) == 3
	}, "every proxy scraped after the traffic")
	require.Contains(t, got, "traffic->frontend", "%+v", ed)
	require.Contains(t, got, "frontend->backend", "%+v", ed)
	require.Contains(t, got, "intruder->backend", "%+v", ed)
	assert.Equal(t, float64(n), ed.Edges[got["traffic->frontend"]].Requests)
	assert.Equal(t, idTraffic, ed.Edges[got["traffic->frontend"]].ClientID)
	assert.Equal(t, idBackend, ed.Edges[got["frontend->backend"]].ServerID)
	assert.LessOrEqual(t, ed.Edges[got["intruder->backend"]].Denied, float64(c["intruder"].Denied))

	var az struct {
		Rows []struct {
			Authorization string  `json:"authorization"`
			Allowed       float64 `json:"allowed"`
			Denied        float64 `json:"denied"`
		} `json:"rows"`
	}
	testutil.Eventually(t, 60*time.Second, func() bool {
		vizJSON(t, &az, append([]string{"authz", "deploy/backend", "--since-start"}, flags...)...)
		return len(az.Rows) == 2 && az.Rows[1].Denied == m
	}, "the backend's proxy scraped after the last denial")
	assert.Equal(t, "authorizationpolicy/backend-http-allow", az.Rows[0].Authorization)
	assert.Equal(t, float64(n), az.Rows[0].Allowed)
	// Now that the last denial was scraped, the denied edge counts it too.
	vizJSON(t, &ed, append([]string{"edges", "--since-start"}, flags...)...)
	for _, e := range ed.Edges {
		if e.Src.Name == "intruder" && e.Dst.Name == "backend" {
			assert.Equal(t, float64(c["intruder"].Denied), e.Denied)
		}
	}

	// A window is increase() over it: traffic made inside it shows.
	p.traffic.Allow(n)
	p.waitCounts(t, 2*n, m)
	testutil.Eventually(t, 60*time.Second, func() bool {
		var w statJSON
		vizJSON(t, &w, append([]string{"stat", "deploy/frontend", "--window", "2m"}, flags...)...)
		return len(w.Rows) == 1 && w.Rows[0].Requests > 0 && w.Rows[0].RPS != nil && *w.Rows[0].RPS > 0
	}, "a rate over the window")
}
