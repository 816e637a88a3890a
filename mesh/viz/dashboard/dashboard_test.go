package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/dashboard"
)

const intruderID = "intruder.shop.serviceaccount.identity.weft.cluster.local"

// fakeSource serves fixed metrics for two pods: api denies the intruder.
type fakeSource struct {
	mu    sync.Mutex
	count int
}

var (
	api      = viz.Target{Namespace: "shop", Pod: "api-0", WorkloadKind: "deployment", Workload: "api", Identity: "api.shop.serviceaccount.identity.weft.cluster.local"}
	intruder = viz.Target{Namespace: "shop", Pod: "intruder-0", WorkloadKind: "deployment", Workload: "intruder", Identity: intruderID}
)

func (f *fakeSource) Targets(context.Context) ([]viz.Target, error) {
	return []viz.Target{api, intruder}, nil
}

func (f *fakeSource) Metrics(_ context.Context, t viz.Target) (io.ReadCloser, error) {
	f.mu.Lock()
	f.count++
	n := f.count
	f.mu.Unlock()
	text := "# TYPE inbound_http_authz_deny_total counter\n"
	if t.Pod == "api-0" {
		text += `inbound_http_authz_deny_total{srv_kind="server",srv_name="api",target_port="8080",tls="true",client_id="` + intruderID + `"} ` + itoa(n) + "\n"
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

type explainer struct{ asked chan viz.DeniedPair }

func (e *explainer) Explain(_ context.Context, d viz.DeniedPair) (string, error) {
	e.asked <- d
	return "decision: deny (unauthorized)", nil
}

func start(t *testing.T, opts ...dashboard.Option) (*dashboard.Dashboard, *httptest.Server) {
	t.Helper()
	d, err := dashboard.New(&fakeSource{}, append([]dashboard.Option{dashboard.WithInterval(100 * time.Millisecond), dashboard.WithWindow(200 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = d.Run(ctx); close(done) }()
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	testutil.Eventually(t, 0, func() bool { f := d.Latest(); return f != nil && len(f.Denials) > 0 }, "a frame with the denial")
	return d, srv
}

func get(t *testing.T, srv *httptest.Server, path string, host string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 0), http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestDashboardServesItsEmbeddedPageWithAStrictPolicy(t *testing.T) {
	_, srv := start(t)
	resp := get(t, srv, "/", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(body), `<script src="app.js"`)
	assert.NotContains(t, string(body), "http://", "nothing is loaded from elsewhere")
	assert.NotContains(t, string(body), "https://")
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'self'")
	assert.Contains(t, csp, "frame-ancestors 'none'")
	assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	js := get(t, srv, "/app.js", "")
	require.Equal(t, http.StatusOK, js.StatusCode)
	src, _ := io.ReadAll(js.Body)
	assert.NotContains(t, string(src), "innerHTML", "values from the mesh are inserted as text only")
}

func TestDashboardIsReadOnlyAndRefusesForeignHostNames(t *testing.T) {
	_, srv := start(t)
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, srv.URL+"/api/frame", strings.NewReader("{}"))
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, m)
	}
	// DNS rebinding: a page on evil.example resolving to 127.0.0.1.
	assert.Equal(t, http.StatusMisdirectedRequest, get(t, srv, "/api/frame", "evil.example:8080").StatusCode)
	assert.Equal(t, http.StatusOK, get(t, srv, "/api/frame", "localhost:1234").StatusCode)
	assert.Equal(t, http.StatusOK, get(t, srv, "/api/frame", "[::1]:1234").StatusCode)

	_, srv2 := start(t, dashboard.WithAllowedHosts("mesh.internal"))
	assert.Equal(t, http.StatusOK, get(t, srv2, "/api/frame", "mesh.internal").StatusCode)
}

func TestDashboardFrameShowsTheDenialAndExplainsOnlyDenialsItShows(t *testing.T) {
	ex := &explainer{asked: make(chan viz.DeniedPair, 4)}
	_, srv := start(t, dashboard.WithExplainer(ex))
	resp := get(t, srv, "/api/frame", "")
	var f dashboard.Frame
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&f))
	require.NotEmpty(t, f.Denials)
	d := f.Denials[0]
	assert.Equal(t, intruderID, d.From)
	assert.Equal(t, "shop/intruder->shop/api", d.Edge)
	require.Len(t, f.Edges, 1)
	assert.Positive(t, f.Edges[0].Denied)

	ok := get(t, srv, "/api/explain?from="+d.From+"&namespace=shop&pod=api-0&port=8080", "")
	require.Equal(t, http.StatusOK, ok.StatusCode)
	var out struct{ Explanation, Command string }
	require.NoError(t, json.NewDecoder(ok.Body).Decode(&out))
	assert.Contains(t, out.Explanation, "decision: deny")
	assert.Contains(t, out.Command, "weft policy explain")
	assert.Equal(t, "api-0", (<-ex.asked).ToPod)

	// Any other pair is not explained: the endpoint is no policy oracle.
	assert.Equal(t, http.StatusNotFound, get(t, srv, "/api/explain?from=admin.shop.serviceaccount.identity.weft.cluster.local&namespace=shop&pod=api-0&port=8080", "").StatusCode)
	assert.Equal(t, http.StatusNotFound, get(t, srv, "/api/explain?from="+strings.Repeat("a", 600)+"&namespace=shop&pod=api-0&port=8080", "").StatusCode)
	assert.Empty(t, ex.asked)
}

func TestDashboardCapsLiveStreamsAndStreamsFrames(t *testing.T) {
	_, srv := start(t, dashboard.WithMaxStreams(2), dashboard.WithMaxRequests(4))
	open := func() *http.Response {
		req, _ := http.NewRequestWithContext(testutil.Context(t, 0), http.MethodGet, srv.URL+"/api/events", nil)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	a, b := open(), open()
	require.Equal(t, http.StatusOK, a.StatusCode)
	require.Equal(t, http.StatusOK, b.StatusCode)
	// Each stream starts with a frame.
	line, err := bufio.NewReader(a.Body).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "event: frame\n", line)
	third := open()
	assert.Equal(t, http.StatusServiceUnavailable, third.StatusCode, "a third stream is refused")
	b.Body.Close()
	testutil.Eventually(t, 0, func() bool {
		r := get(t, srv, "/api/events", "")
		defer r.Body.Close()
		return r.StatusCode == http.StatusOK
	}, "a closed stream frees its place")
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range [][]dashboard.Option{
		{dashboard.WithInterval(time.Millisecond)},
		{dashboard.WithInterval(time.Second), dashboard.WithWindow(time.Millisecond * 500)},
		{dashboard.WithHistory(1)},
		{dashboard.WithMaxStreams(0)},
		{dashboard.WithMaxStreams(8), dashboard.WithMaxRequests(4)},
	} {
		_, err := dashboard.New(&fakeSource{}, opts...)
		assert.Error(t, err)
	}
	_, err := dashboard.New(nil)
	assert.Error(t, err)
}
