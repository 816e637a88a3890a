package cli

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/local/demo"
)

const (
	idFrontend = "frontend.demo.serviceaccount.identity.weft.cluster.local"
	idBackend  = "backend.demo.serviceaccount.identity.weft.cluster.local"
	idTraffic  = "traffic.demo.serviceaccount.identity.weft.cluster.local"
	idIntruder = "intruder.demo.serviceaccount.identity.weft.cluster.local"
)

// pacedDemo runs the demo with gated clients until the test ends.
type pacedDemo struct {
	live              demo.Live
	traffic, intruder *demo.Gate
}

func startPacedDemo(t *testing.T) *pacedDemo {
	t.Helper()
	p := &pacedDemo{traffic: demo.NewGate(), intruder: demo.NewGate()}
	ready := make(chan demo.Live, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := demo.Run(ctx, demo.Config{Out: io.Discard, TrafficGate: p.traffic, IntruderGate: p.intruder,
			OnReady: func(l demo.Live) { ready <- l }})
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the demo did not stop")
		}
	})
	select {
	case p.live = <-ready:
	case err := <-done:
		t.Fatalf("the demo stopped before it was ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the demo was not ready in time")
	}
	return p
}

// counts returns what the demo's programs counted per workload.
func (p *pacedDemo) counts() map[string]demo.Figures {
	out := map[string]demo.Figures{}
	for _, f := range p.live.Stats.Snapshot(time.Minute) {
		out[f.Workload] = f
	}
	return out
}

func (p *pacedDemo) waitCounts(t *testing.T, traffic, intruder int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() bool {
		c := p.counts()
		return c["traffic"].Requests == traffic && c["intruder"].Requests == intruder
	}, "the demo's clients to finish their permitted requests")
}

func vizJSON(t *testing.T, out any, args ...string) string {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	code := VizCommand().Run(testutil.Context(t, time.Minute), args, IO{Stdout: &stdout, Stderr: &stderr})
	require.Equal(t, ExitOK, code, "weft viz %v: %s", args, stderr.String())
	if out != nil {
		require.NoError(t, json.Unmarshal([]byte(stdout.String()), out), stdout.String())
	}
	return stdout.String()
}

type statJSON struct {
	WindowSeconds float64 `json:"windowSeconds"`
	Rows          []struct {
		Name        string   `json:"name"`
		Meshed      int      `json:"meshedPods"`
		Pods        int      `json:"pods"`
		Requests    float64  `json:"requests"`
		Successes   float64  `json:"successes"`
		Denied      float64  `json:"denied"`
		SuccessRate *float64 `json:"successRate"`
		RPS         *float64 `json:"rps"`
		MTLSShare   *float64 `json:"mtlsShare"`
		P50         *float64 `json:"latencyMsP50"`
	} `json:"rows"`
}

func (s statJSON) byName() map[string]int {
	m := map[string]int{}
	for i, r := range s.Rows {
		m[r.Name] = i
	}
	return m
}

func TestVizCommandsAgreeWithTheDemosOwnCounters(t *testing.T) {
	p := startPacedDemo(t)
	dir := p.live.State.Dir
	local := []string{"-n", "demo", "--local", dir, "-o", "json"}
	const n, m = 40, 6
	p.traffic.Allow(n)
	p.intruder.Allow(m)
	p.waitCounts(t, n, m)
	c := p.counts()
	require.Equal(t, int64(n), c["traffic"].Succeeded, "every traffic request succeeded end to end")
	require.Equal(t, int64(n), c["frontend"].Succeeded)
	require.Equal(t, int64(n), c["backend"].Succeeded)
	require.Equal(t, int64(m), c["intruder"].Denied, "every intruder request was denied")

	// stat: what each workload was sent, since the proxies started: what
	// it served and what its policy denied (backend denies the intruder:
	// 403s, not failures). The proxies count a response when it ends, a
	// moment after the client may have read it: wait for the count, then
	// compare exactly.
	var st statJSON
	testutil.Eventually(t, 30*time.Second, func() bool {
		vizJSON(t, &st, append([]string{"stat", "deploy", "--since-start"}, local...)...)
		ix := st.byName()
		_, ok1 := ix["frontend"]
		_, ok2 := ix["backend"]
		return ok1 && ok2 && st.Rows[ix["frontend"]].Requests == n && st.Rows[ix["backend"]].Requests == n+m
	}, "the proxies to count every request")
	ix := st.byName()
	require.Len(t, st.Rows, 4)
	assert.Equal(t, float64(m), st.Rows[ix["backend"]].Denied, "the intruder's requests")
	assert.Zero(t, st.Rows[ix["frontend"]].Denied)
	for _, w := range []string{"frontend", "backend"} {
		r := st.Rows[ix[w]]
		assert.Equal(t, float64(c[w].Succeeded)+r.Denied, r.Successes, w)
		assert.Equal(t, 1.0, *r.SuccessRate, w)
		assert.Equal(t, 1.0, *r.MTLSShare, w+": every request came over mutual TLS")
		assert.Equal(t, 1, r.Meshed, w)
		assert.NotNil(t, r.P50, w)
	}
	for _, w := range []string{"traffic", "intruder"} {
		assert.Zero(t, st.Rows[ix[w]].Requests, w+" serves nothing")
	}

	// stat authority: what callers sent to backend's service.
	var au statJSON
	vizJSON(t, &au, append([]string{"stat", "au", "--since-start"}, local...)...)
	aix := au.byName()
	require.Contains(t, aix, "backend.demo.svc.cluster.local:8081", "%+v", au)
	// The outbound proxies count attempts, as Linkerd's endpoint metrics
	// do. On a loaded machine a connection to backend's proxy can miss
	// the connect timeout; that attempt is counted, as a failure, and the
	// request goes out again on a new connection. So requests may exceed
	// the calls, and successes (403s included) equal them.
	bau := au.Rows[aix["backend.demo.svc.cluster.local:8081"]]
	assert.Equal(t, float64(n+m), bau.Successes, "frontend's and intruder's calls")
	assert.GreaterOrEqual(t, bau.Requests, float64(n+m), "frontend's and intruder's calls, and any attempt whose connection failed")

	// edges: who called whom, with both verified identities.
	var ed struct {
		Edges []struct {
			Src       struct{ Name string } `json:"src"`
			Dst       struct{ Name string } `json:"dst"`
			ClientID  string                `json:"clientId"`
			ServerID  string                `json:"serverId"`
			Secured   bool                  `json:"secured"`
			Denied    float64               `json:"denied"`
			Requests  float64               `json:"requests"`
			Successes float64               `json:"successes"`
		} `json:"edges"`
	}
	vizJSON(t, &ed, append([]string{"edges", "--since-start"}, local...)...)
	got := map[string]int{}
	for i, e := range ed.Edges {
		got[e.Src.Name+"->"+e.Dst.Name] = i
	}
	require.Len(t, ed.Edges, 3, "%+v", ed)
	tf := ed.Edges[got["traffic->frontend"]]
	// Edges count the client proxy's attempts, as the authority did above:
	// successes equal the calls, requests are at least them.
	assert.Equal(t, float64(c["traffic"].Requests), tf.Successes)
	assert.GreaterOrEqual(t, tf.Requests, float64(c["traffic"].Requests))
	assert.Equal(t, idTraffic, tf.ClientID)
	assert.Equal(t, idFrontend, tf.ServerID)
	assert.True(t, tf.Secured)
	fb := ed.Edges[got["frontend->backend"]]
	assert.Equal(t, float64(c["backend"].Succeeded), fb.Successes)
	assert.GreaterOrEqual(t, fb.Requests, float64(c["backend"].Succeeded))
	assert.Equal(t, idFrontend, fb.ClientID)
	assert.Equal(t, idBackend, fb.ServerID)
	ib := ed.Edges[got["intruder->backend"]]
	assert.Equal(t, float64(c["intruder"].Denied), ib.Denied)
	assert.Equal(t, idIntruder, ib.ClientID)
	assert.Zero(t, fb.Denied+tf.Denied)

	// authz: allowed per authorization, denied with the client and the
	// command that explains it.
	var az struct {
		Rows []struct {
			Authorization string  `json:"authorization"`
			Allowed       float64 `json:"allowed"`
			Denied        float64 `json:"denied"`
			Denials       []struct {
				From    string  `json:"from"`
				Count   float64 `json:"count"`
				Explain string  `json:"explain"`
			} `json:"denials"`
		} `json:"rows"`
	}
	vizJSON(t, &az, append([]string{"authz", "deploy/backend", "--since-start"}, local...)...)
	require.Len(t, az.Rows, 2, "%+v", az)
	assert.Equal(t, "authorizationpolicy/backend-http-allow", az.Rows[0].Authorization)
	assert.Equal(t, float64(c["backend"].Succeeded), az.Rows[0].Allowed)
	assert.Empty(t, az.Rows[1].Authorization)
	assert.Equal(t, float64(c["intruder"].Denied), az.Rows[1].Denied)
	require.Len(t, az.Rows[1].Denials, 1)
	d := az.Rows[1].Denials[0]
	assert.Equal(t, idIntruder, d.From)
	// The hint is a command that runs and says why.
	args := strings.Fields(d.Explain)
	require.Equal(t, []string{"weft", "policy", "explain"}, args[:3])
	var eout, eerr testutil.SyncBuffer
	require.Equal(t, ExitOK, PolicyCommand().Run(testutil.Context(t, 0), args[2:], IO{Stdout: &eout, Stderr: &eerr}), eerr.String())
	assert.Contains(t, eout.String(), "decision: deny")
	assert.Contains(t, eout.String(), idIntruder)

	// routes: the route backend serves.
	var rt struct {
		Routes []struct {
			Route    string  `json:"route"`
			Requests float64 `json:"requests"`
		} `json:"routes"`
	}
	vizJSON(t, &rt, append([]string{"routes", "deploy/backend", "--since-start"}, local...)...)
	require.Len(t, rt.Routes, 1, "%+v", rt)
	assert.Equal(t, float64(c["backend"].Succeeded), rt.Routes[0].Requests)

	// A window: the command reads the proxies, k more requests go, and
	// Ctrl-C ends the window; exactly those k are in it.
	const k = 12
	var stdout, stderr testutil.SyncBuffer
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	wg.Add(1)
	code := -1
	go func() {
		defer wg.Done()
		code = VizCommand().Run(wctx, append([]string{"stat", "deploy", "--window", "5m"}, local...), IO{Stdout: &stdout, Stderr: &stderr})
	}()
	testutil.Eventually(t, 30*time.Second, func() bool { return strings.Contains(stderr.String(), "sampling the proxies") }, "the first reading")
	p.traffic.Allow(k)
	p.waitCounts(t, n+k, m)
	testutil.Eventually(t, 30*time.Second, func() bool {
		var now statJSON
		vizJSON(t, &now, append([]string{"stat", "deploy", "--since-start"}, local...)...)
		ix := now.byName()
		return len(now.Rows) == 4 && now.Rows[ix["frontend"]].Requests == n+k && now.Rows[ix["backend"]].Requests == n+k+m
	}, "the proxies to count the window's requests")
	stop()
	wg.Wait()
	require.Equal(t, ExitOK, code, stderr.String())
	var win statJSON
	require.NoError(t, json.Unmarshal([]byte(stdout.String()), &win), stdout.String())
	wix := win.byName()
	fr := win.Rows[wix["frontend"]]
	assert.Equal(t, float64(k), fr.Requests, "exactly the requests made inside the window")
	require.NotNil(t, fr.RPS)
	assert.Greater(t, win.WindowSeconds, 0.0)
	assert.InDelta(t, float64(k)/win.WindowSeconds, *fr.RPS, 1e-9)
	assert.Zero(t, win.Rows[wix["intruder"]].Requests)
}
