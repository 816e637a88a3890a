package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The demo's chain on loopback: HTTP/1.1 frontend -> gRPC backend whose
// UnaryCall fails on every 4th call; the load generator's counts show the
// share the cluster suite checks the mesh's metrics against.
func TestDemoChainFailsTheShareItIsToldTo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	errc := make(chan error, 1)
	gs := serveGRPC(ln, "api", 4, errc)
	defer gs.Stop()
	up, err := dialUpstream(ln.Addr().String())
	require.NoError(t, err)
	defer up.cc.Close()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { up.serve("web", w, r) }))
	defer web.Close()

	codes := map[string]map[int]int{"/unary": {}, "/empty": {}}
	for i := 0; i < 8; i++ {
		for path := range codes {
			resp, err := http.Get(web.URL + path)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			codes[path][resp.StatusCode]++
			if resp.StatusCode != http.StatusOK {
				assert.Contains(t, string(body), "UnaryCall: Internal: api: call", "a failure names the method and the status")
			}
		}
	}
	assert.Equal(t, map[int]int{200: 6, 502: 2}, codes["/unary"], "every 4th UnaryCall fails")
	assert.Equal(t, map[int]int{200: 8}, codes["/empty"], "EmptyCall never fails")

	// The load generator alternates its URLs; its counts are served.
	a := &app{name: "load", client: &http.Client{Timeout: callTimeout}}
	ctx, cancel := context.WithCancel(context.Background())
	a.startupLoad(ctx, []string{web.URL + "/unary", web.URL + "/empty"}, 10*time.Millisecond)
	var c Counts
	require.Eventually(t, func() bool {
		rec := httptest.NewRecorder()
		a.loadCounts(rec, httptest.NewRequest(http.MethodGet, "/load/counts", nil))
		c = Counts{}
		return json.Unmarshal(rec.Body.Bytes(), &c) == nil && c.OK+c.Failed >= 16
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	<-a.startup.done
	assert.Positive(t, c.Codes["502"], "the failing method shows in the load's counts")
	assert.Positive(t, c.OK)
}

func TestLoadFlagsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		list     string
		interval time.Duration
		want     string
	}{
		{"", time.Second, "want one or more http:// URLs"},
		{"ftp://web/x", time.Second, `url "ftp://web/x"`},
		{"http://web:8080/unary", time.Millisecond, "want 10ms..1m"},
		{"http://web:8080/unary", time.Hour, "want 10ms..1m"},
	} {
		_, err := parseLoad(tc.list, tc.interval)
		assert.ErrorContains(t, err, tc.want, tc.list)
	}
	urls, err := parseLoad(" http://web:8080/unary, http://web:8080/empty ,", time.Second)
	require.NoError(t, err)
	assert.Equal(t, []string{"http://web:8080/unary", "http://web:8080/empty"}, urls)
	_, err = dialUpstream("api")
	assert.ErrorContains(t, err, "want host:port")
}
