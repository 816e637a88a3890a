package dataplane_test

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// uploadHead starts a chunked upload whose first chunk the application
// receives.
const uploadHead = "POST /echo HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"

// abortKinds end an upload the application has started to read, each in
// its own broken way; answered tells whether the client waits for an
// answer (the proxy found a framing error) or went away.
var abortKinds = []struct {
	name     string
	answered bool
	finish   func(c net.Conn) *http.Response
}{
	{"client disconnect", false, func(c net.Conn) *http.Response { c.Close(); return nil }},
	{"bad chunk size", true, func(c net.Conn) *http.Response { return exchange(c, "zz\r\n") }},
	{"truncated final chunk", false, func(c net.Conn) *http.Response {
		io.WriteString(c, "0\r\nX-Checksum: 12")
		c.Close()
		return nil
	}},
	{"oversize chunk extension", true, func(c net.Conn) *http.Response {
		return exchange(c, "5;"+strings.Repeat("x", 5000)+"\r\nhello\r\n")
	}},
}

// uploadApp is an HTTP application whose /echo reports each request it
// starts to read.
func uploadApp(t *testing.T) (*httpApp, chan struct{}) {
	app := startHTTPApp(t)
	started := make(chan struct{}, 1024)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		io.Copy(w, r.Body)
	}
	return app, started
}

// startUpload sends the head and first chunk of an upload and waits until
// the application started reading it.
func startUpload(t *testing.T, addr string, started chan struct{}) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, uploadHead)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the application never saw the upload")
	}
	return c
}

func TestAbortedUploadsLeaveNoGoroutineOrApplicationConnectionBehind(t *testing.T) {
	// Defect 3: each aborted or malformed chunked upload left a goroutine
	// and an application connection open for good.
	const n = 100
	paths := []struct {
		name  string
		start func(t *testing.T, app *httpApp) string
	}{
		{"outbound to an unmeshed endpoint", func(t *testing.T, app *httpApp) string {
			return startHTTPPair(t, httpPairOptions{app: app, unmeshed: true}).clientAddr
		}},
		{"inbound from a plaintext client", func(t *testing.T, app *httpApp) string {
			_, addr := plainInbound(t, allowAll(t), app)
			return addr
		}},
		{"across the mesh", func(t *testing.T, app *httpApp) string {
			return startHTTPPair(t, httpPairOptions{app: app}).clientAddr
		}},
	}
	for _, path := range paths {
		for _, kind := range abortKinds {
			t.Run(path.name+"/"+kind.name, func(t *testing.T) {
				app, started := uploadApp(t)
				addr := path.start(t, app)
				base := runtime.NumGoroutine()
				for i := 0; i < n; i++ {
					c := startUpload(t, addr, started)
					resp := kind.finish(c)
					if kind.answered {
						require.NotNil(t, resp, "upload %d: the client got no answer", i)
						assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a framing error is the client's fault")
					}
					c.Close()
				}
				// The proxies hold one pooled HTTP/2 connection between
				// them at most; a leak holds a goroutine per upload.
				deadline := time.Now().Add(20 * time.Second)
				for runtime.NumGoroutine() > base+20 || app.open.Load() != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("after %d aborted uploads: %d goroutines (%d before), %d application connections open",
							n, runtime.NumGoroutine(), base, app.open.Load())
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}

func TestChunkFramingErrorsAreAnswered400(t *testing.T) {
	// Defect 4: a malformed chunked body is the client's fault (400), not
	// the upstream's (502).
	for _, unmeshed := range []bool{true, false} {
		name := map[bool]string{true: "unmeshed endpoint", false: "meshed endpoint"}[unmeshed]
		t.Run(name, func(t *testing.T) {
			app, started := uploadApp(t)
			hp := startHTTPPair(t, httpPairOptions{app: app, unmeshed: unmeshed})
			c := startUpload(t, hp.clientAddr, started)
			defer c.Close()
			resp := exchange(c, "zz\r\n")
			require.NotNil(t, resp, "the client gets an answer")
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
			testutil.Eventually(t, 10*time.Second, func() bool { return app.open.Load() == 0 }, "the application connection closed")
		})
	}
}
