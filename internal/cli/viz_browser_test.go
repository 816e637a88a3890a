package cli

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

var screenshot = flag.String("viz.screenshot", "", "write the dashboard's screenshot to this PNG file (docs/viz-dashboard.png)")

// chromium returns the path of Debian's Chromium, skipping the test
// without it (failing under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium); the dashboard's browser test needs it")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// dashboardView is what the page shows, read by script in the browser.
type dashboardView struct {
	Nodes       []string          `json:"nodes"`
	Edges       map[string]string `json:"edges"`  // src->dst: label text
	Denied      []string          `json:"denied"` // src->dst of denied edges
	EdgeRows    []string          `json:"edgeRows"`
	TapRows     int               `json:"tapRows"`
	TapText     []string          `json:"tapText"` // the first rows' cells, tab-separated
	TapStatus   string            `json:"tapStatus"`
	Explanation string            `json:"explanation"`
}

const readView = `(() => {
  const v = {nodes: [], edges: {}, denied: [], edgeRows: [], tapRows: 0, tapText: [], explanation: ""};
  document.querySelectorAll("[data-node]").forEach(n => v.nodes.push(n.getAttribute("data-node")));
  document.querySelectorAll("[data-edge-label]").forEach(l => v.edges[l.getAttribute("data-edge-label")] = l.textContent);
  document.querySelectorAll("path.edge.denied").forEach(p => v.denied.push(p.getAttribute("data-edge")));
  document.querySelectorAll("#edges tbody tr").forEach(r => v.edgeRows.push(r.textContent));
  v.tapRows = document.querySelectorAll("tr[data-tap-row]").length;
  v.tapText = Array.from(document.querySelectorAll("tr[data-tap-row]")).slice(0, 20).map(r => Array.from(r.cells).map(c => c.textContent).join("\t"));
  v.tapStatus = document.getElementById("tap-status").textContent;
  v.explanation = document.getElementById("explain-text").textContent;
  return v;
})()`

func TestDashboardInAHeadlessBrowserShowsTheDemoMeshLive(t *testing.T) {
	exe := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// weft demo --dashboard, as a user runs it.
	var out, errb testutil.SyncBuffer
	demoCtx, stopDemo := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- DemoCommand().Run(demoCtx, []string{"--plain", "--dashboard", "127.0.0.1:0", "--interval", "500ms"}, IO{Stdout: &out, Stderr: &errb})
	}()
	defer func() {
		stopDemo()
		select {
		case code := <-done:
			assert.Equal(t, ExitOK, code, "demo exit: %s", errb.String())
		case <-time.After(testutil.DefaultTimeout):
			t.Error("the demo did not stop")
		}
	}()
	urlRE := regexp.MustCompile(`dashboard at (http://\S+)`)
	var url string
	testutil.Eventually(t, 0, func() bool {
		select {
		case code := <-done:
			t.Fatalf("the demo exited with %d: %s", code, errb.String())
		default:
		}
		if m := urlRE.FindStringSubmatch(errb.String()); m != nil {
			url = m[1]
		}
		return url != ""
	}, "the demo to print its dashboard address")

	// A real Chromium, headless, isolated, talking to nothing but loopback.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 2000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	_, err := chromedp.Run(bctx, chromedp.Navigate(url))
	require.NoError(t, err)

	const (
		frontend = "demo/frontend"
		backend  = "demo/backend"
		traffic  = "demo/traffic"
		intruder = "demo/intruder"
	)
	rate := regexp.MustCompile(`(\d+\.\d)rps`)
	live := func(label string) bool {
		m := rate.FindStringSubmatch(label)
		return m != nil && m[1] != "0.0"
	}
	// Wait, by polling what the page renders, until it shows the whole
	// demo: each condition below is what a person looks for.
	var v dashboardView
	defer func() {
		if t.Failed() {
			t.Logf("what the page showed last: %+v", v)
		}
	}()
	testutil.Eventually(t, 90*time.Second, func() bool {
		got, err := chromedp.Run(bctx, chromedp.Evaluate[dashboardView](readView))
		if err != nil {
			t.Logf("reading the page: %v", err)
			return false
		}
		v = got
		// The live requests come from tapping the demo's proxies over
		// mutual TLS with the local mesh's tapper certificate: a row is
		// required (a page that cannot tap fails here).
		return len(v.Nodes) >= 4 && live(v.Edges[traffic+"->"+frontend]) && live(v.Edges[frontend+"->"+backend]) &&
			len(v.Denied) > 0 && v.TapRows > 0
	}, "the page to show four workloads, live edges, a denied edge and a tap row")
	assert.NotContains(t, v.TapStatus, "unavailable")
	// A tapped request between two meshed workloads, answered, over mTLS:
	// columns are time, proxy, source, destination, method, authority,
	// path, status, latency, mTLS.
	tapped := false
	for _, row := range v.TapText {
		c := strings.Split(row, "\t")
		if len(c) == 10 && c[2] == "traffic" && c[3] == "frontend" && c[4] == "GET" && c[7] == "200" && c[9] == "yes" {
			tapped = true
		}
		if len(c) == 10 && c[2] == "frontend" && c[3] == "backend" && c[7] == "200" && c[9] == "yes" {
			tapped = true
		}
	}
	assert.True(t, tapped, "a tap row of a meshed call, answered, over mTLS: %q", v.TapText)

	assert.ElementsMatch(t, []string{frontend, backend, traffic, intruder}, v.Nodes)
	assert.Contains(t, v.Denied, intruder+"->"+backend)
	assert.Contains(t, v.Edges[intruder+"->"+backend], "denied")
	assert.Contains(t, v.Edges[frontend+"->"+backend], "mTLS", "the edge is mutual TLS")
	rows := strings.Join(v.EdgeRows, "\n")
	assert.Contains(t, rows, "frontend.demo.serviceaccount.identity.weft.cluster.local", "the backend's proxy verified the frontend")
	assert.Contains(t, rows, "backend.demo.serviceaccount.identity.weft.cluster.local", "the frontend's proxy verified the backend")
	assert.Contains(t, rows, "intruder.demo.serviceaccount.identity.weft.cluster.local")

	// Clicking the denied edge shows the policy's explanation.
	// The page redraws every frame; a click that lands during a redraw
	// is simply repeated.
	testutil.Eventually(t, 60*time.Second, func() bool {
		if _, err := chromedp.Run(bctx, chromedp.Click(chromedp.CSS(`text[data-edge-label="`+intruder+`->`+backend+`"]`))); err != nil {
			t.Logf("clicking the denied edge: %v", err)
			return false
		}
		for i := 0; i < 20; i++ {
			got, err := chromedp.Run(bctx, chromedp.Evaluate[dashboardView](readView))
			if err != nil {
				return false
			}
			v = got
			if strings.Contains(v.Explanation, "decision: deny") {
				return true
			}
			time.Sleep(100 * time.Millisecond) // polling the page, not ordering events
		}
		return false
	}, "the explanation of the denial")
	assert.Contains(t, v.Explanation, "intruder.demo.serviceaccount.identity.weft.cluster.local")

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.True(t, len(png) > 8 && string(png[1:4]) == "PNG", "a PNG screenshot")
	if *screenshot != "" {
		require.NoError(t, os.WriteFile(*screenshot, png, 0o644))
	}
}
