package dataplane_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
)

// holdApp is an h2c application whose /hold?i=N responses are size bytes
// written in chunks of holdChunk, each flushed; sent[N] counts the bytes
// of response N the HTTP/2 server has written (a flush of the bundled
// HTTP/2 server returns once its frames are out, so a response whose
// flow-control window is used up stops counting). Other paths are the
// httpApp's.
type holdApp struct {
	*httpApp
	sent [fairAttackStreams]atomic.Int64
}

const (
	holdChunk         = 16 << 10
	fairAttackStreams = 6
	fairVictimBytes   = 1 << 20
)

func startHoldApp(t *testing.T, size int) *holdApp {
	h := &holdApp{httpApp: startHTTPApp(t)}
	chunk := strings.Repeat("h", holdChunk)
	h.handler = func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hold" {
			h.serveDefault(w, r)
			return
		}
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for left := size; left > 0; left -= holdChunk {
			if _, err := io.WriteString(w, chunk[:min(left, holdChunk)]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			h.sent[i].Add(int64(min(left, holdChunk)))
		}
	}
	return h
}

// serveDefault answers /big like the httpApp.
func (h *holdApp) serveDefault(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	w.Header().Set("Content-Length", strconv.Itoa(n))
	chunk := strings.Repeat("x", 32<<10)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := io.WriteString(w, chunk[:k]); err != nil {
			return
		}
		n -= k
	}
}

func (h *holdApp) totalSent() int64 {
	var n int64
	for i := range h.sent {
		n += h.sent[i].Load()
	}
	return n
}

// stallStreams opens fairAttackStreams requests for /hold on a new
// HTTP/2 connection to addr whose client announces a zero stream window
// and never opens it: the proxy can send none of their body.
func stallStreams(t *testing.T, addr string) *h2client {
	h := dialH2(t, addr)
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	}))
	for i := range fairAttackStreams {
		id := uint32(2*i + 1)
		require.True(t, h.write(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/hold?i=" + strconv.Itoa(i)), EndStream: true, EndHeaders: true})
		}))
	}
	return h
}

// victimGet fetches /big?n=fairVictimBytes on a connection of its own,
// under a hang guard: on a connection whose window the stalled streams
// hold, nothing arrives.
func victimGet(t *testing.T, addr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/big?n="+strconv.Itoa(fairVictimBytes), nil)
	require.NoError(t, err)
	c := h2cClient()
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return int(n), err
}

// TestAStalledClientDoesNotStarveOthersOnASharedUpstreamConnection is
// finding 3 of issue 27. A client announces a zero window on several
// large responses; the proxy cannot deliver them, stops reading them from
// its pooled HTTP/2 connection upstream, and on dc15bc3 their unread
// bytes held that connection's whole window: every other client's
// responses on it stalled. Now only each stream's own window holds back
// a stream nobody reads. Inbound, from an unmeshed client to the
// application over the pooled h2c connection; outbound, from the local
// application through the client proxy, whose pooled connection to the
// peer proxy is shared too.
func TestAStalledClientDoesNotStarveOthersOnASharedUpstreamConnection(t *testing.T) {
	window := int64(testConfig().H2StreamWindow)
	connWindow := int64(testConfig().H2ConnectionWindow)
	require.Greater(t, fairAttackStreams*window, connWindow, "the stalled streams could hold the whole connection window")

	t.Run("inbound", func(t *testing.T) {
		app := startHoldApp(t, 2<<20)
		_, addr := plainInbound(t, allowAll(t), app.httpApp)
		stallStreams(t, addr)
		// Their bodies have taken the connection window (but for a
		// chunk per stream in flight), or, with the fix, more.
		testutil.Eventually(t, 10*time.Second, func() bool {
			return app.totalSent() >= connWindow-fairAttackStreams*holdChunk
		}, "the stalled responses fill the connection window")

		n, err := victimGet(t, addr)
		require.NoError(t, err, "the victim's response stalled behind the unread ones")
		assert.Equal(t, fairVictimBytes, n)
		assert.EqualValues(t, 1, app.accepted.Load(), "one upstream connection carried them all")
		for i := range app.sent {
			// A stalled response is held back by its stream window:
			// the proxy read what its own buffers take (far less than
			// half a window), so it never gave the window back.
			assert.LessOrEqual(t, app.sent[i].Load(), window, "response %d", i)
		}
	})

	t.Run("outbound", func(t *testing.T) {
		app := startHoldApp(t, 3<<20)
		hp := startHTTPPair(t, httpPairOptions{app: app.httpApp})
		stallStreams(t, hp.clientAddr)
		testutil.Eventually(t, 10*time.Second, func() bool {
			return app.totalSent() >= connWindow-fairAttackStreams*holdChunk
		}, "the stalled responses fill the connection window")

		n, err := victimGet(t, hp.clientAddr)
		require.NoError(t, err, "the victim's response stalled behind the unread ones")
		assert.Equal(t, fairVictimBytes, n)
		assert.EqualValues(t, 1, hp.inB.accepted.Load(), "one connection from the client proxy to the server proxy")
		assert.EqualValues(t, 1, app.accepted.Load(), "one upstream connection to the application")
		for i := range app.sent {
			// Two hops, each holding at most a stream window, plus
			// what the server proxy's handler has in its copy and
			// response buffers (well under 64 KiB).
			assert.LessOrEqual(t, app.sent[i].Load(), 2*window+64<<10, "response %d", i)
		}
	})
}
