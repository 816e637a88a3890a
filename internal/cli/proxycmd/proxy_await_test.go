package proxycmd_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
)

func TestProxyAwaitReturnsOnceTheProxyIsReady(t *testing.T) {
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" || probes.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	code, _, errs := runCommand(t, proxycmd.ProxyAwaitCommand(), "", "--admin-addr", addr, "--interval", "10ms", "--timeout", "5s")
	assert.Equal(t, core.ExitOK, code, errs)
	assert.GreaterOrEqual(t, probes.Load(), int32(3))
}

func TestProxyAwaitFailsAfterItsTimeoutNamingTheLastAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	code, _, errs := runCommand(t, proxycmd.ProxyAwaitCommand(), "", "--admin-addr", addr, "--interval", "10ms", "--timeout", "1s")
	assert.Equal(t, core.ExitFailure, code)
	assert.Contains(t, errs, "503")
}
