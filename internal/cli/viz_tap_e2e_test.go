package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// tapsOpen reads the tap_streams_open gauge of workload's proxy in the
// demo: the proxy counts a tap once it has registered it, so requests
// made after that are reported to it.
func (p *pacedDemo) tapsOpen(t *testing.T, workload string) float64 {
	t.Helper()
	for _, px := range p.live.State.Proxies {
		if px.Pod.Workload != workload {
			continue
		}
		mfs, err := px.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "tap_streams_open" && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return 0
	}
	t.Fatalf("the demo has no %s proxy", workload)
	return 0
}

// runTapCommand runs `weft viz CMD args...` until it ends by itself
// (--max-events), releasing k traffic requests once backend's proxy has
// registered the tap.
func runTapCommand(t *testing.T, p *pacedDemo, k int64, args ...string) (string, string) {
	t.Helper()
	// A previous command's tap is counted until backend's proxy has seen
	// its client go; counting it as this one's would release the traffic
	// before this tap is registered.
	testutil.Eventually(t, 30*time.Second, func() bool { return p.tapsOpen(t, "backend") == 0 }, "backend's proxy to close the previous tap")
	var stdout, stderr testutil.SyncBuffer
	ctx := testutil.Context(t, 2*time.Minute)
	done := make(chan int, 1)
	go func() { done <- VizCommand().Run(ctx, args, IO{Stdout: &stdout, Stderr: &stderr}) }()
	testutil.Eventually(t, 30*time.Second, func() bool {
		select {
		case code := <-done:
			t.Fatalf("weft viz %v ended with %d before the traffic: %s", args, code, stderr.String())
		default:
		}
		return p.tapsOpen(t, "backend") >= 1
	}, "backend's proxy to register the tap")
	before := p.counts()["traffic"].Requests
	p.traffic.Allow(int(k))
	select {
	case code := <-done:
		require.Equal(t, ExitOK, code, stderr.String())
	case <-ctx.Done():
		t.Fatalf("weft viz %v did not see its events: %s\n%s", args, stdout.String(), stderr.String())
	}
	p.waitCounts(t, before+k, 0)
	return stdout.String(), stderr.String()
}

func TestVizTapPrintsTheDemosLiveRequestsWithVerifiedIdentities(t *testing.T) {
	p := startPacedDemo(t)
	dir := p.live.State.Dir
	const k = 5
	// Each request backend serves is three events: req, rsp, end.
	out, errOut := runTapCommand(t, p, k, "tap", "deploy/backend", "-n", "demo", "--local", dir, "--max-events", "15")
	assert.Contains(t, errOut, "tapping 1 proxies of deployment/backend")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3*k, out)
	kinds := map[string]int{}
	for _, l := range lines {
		kind, _, _ := strings.Cut(l, " ")
		kinds[kind]++
		// Inbound at backend, over mutual TLS, from the client identity
		// backend's proxy verified.
		assert.Contains(t, l, " proxy=in ", l)
		assert.Contains(t, l, " tls=true", l)
		assert.Contains(t, l, " client_id="+idFrontend, l)
		switch kind {
		case "req":
			assert.Contains(t, l, ":method=GET", l)
			assert.Contains(t, l, ":path=/items", l)
		case "rsp":
			assert.Contains(t, l, ":status=200", l)
		case "end":
			assert.Regexp(t, `response-length=[1-9]\d*B`, l)
		}
	}
	assert.Equal(t, map[string]int{"req": k, "rsp": k, "end": k}, kinds)
	c := p.counts()
	assert.Equal(t, int64(k), c["backend"].Succeeded, "the tapped requests are the ones the demo made")
}

func TestVizTapJSONAndTopAgreeWithTheDemosCounters(t *testing.T) {
	p := startPacedDemo(t)
	dir := p.live.State.Dir
	const k = 4
	out, _ := runTapCommand(t, p, k, "tap", "deploy/backend", "-n", "demo", "--local", dir, "-o", "json", "--max-events", "12")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3*k, out)
	for _, l := range lines {
		var e struct {
			Kind            string            `json:"kind"`
			Direction       string            `json:"direction"`
			SourceMeta      map[string]string `json:"sourceMeta"`
			DestinationMeta map[string]string `json:"destinationMeta"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &e), l)
		assert.Equal(t, "inbound", e.Direction)
		assert.Equal(t, "true", e.SourceMeta["tls"], l)
		assert.Equal(t, idFrontend, e.SourceMeta["client_id"], l)
	}

	// top: the hottest path is frontend calling backend, k requests, all
	// successful, as the demo's own counters say.
	out, _ = runTapCommand(t, p, k, "top", "deploy/backend", "-n", "demo", "--local", dir, "-o", "json", "--max-events", "12")
	var top struct {
		Rows []struct {
			Source      string  `json:"source"`
			Destination string  `json:"destination"`
			Method      string  `json:"method"`
			Path        string  `json:"path"`
			Count       int     `json:"count"`
			Successes   int     `json:"successes"`
			SuccessRate float64 `json:"successRate"`
		} `json:"rows"`
		Dropped int64 `json:"dropped"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &top), out)
	require.Len(t, top.Rows, 1, out)
	r := top.Rows[0]
	assert.Equal(t, "GET", r.Method)
	assert.Equal(t, "frontend", r.Source, "named by the identity backend's proxy verified")
	assert.Equal(t, "backend", r.Destination)
	assert.Equal(t, "/items", r.Path)
	assert.Equal(t, k, r.Count)
	assert.Equal(t, k, r.Successes)
	assert.Equal(t, 1.0, r.SuccessRate)
	assert.Zero(t, top.Dropped)
	assert.Equal(t, int64(2*k), p.counts()["backend"].Succeeded)
}
