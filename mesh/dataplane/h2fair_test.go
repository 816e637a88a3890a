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
	"github.com/weftmesh/weft/mesh/dataplane"
)

// holdApp is an h2c application whose /hold?i=N responses are size bytes
// written in chunks of holdChunk, each flushed; sent[N] counts the bytes
// of response N the HTTP/2 server has written (a flush of the bundled
// HTTP/2 server returns once its frames are out, so a response whose
// flow-control window is used up stops counting). Other paths are the
// httpApp's.
type holdApp struct {
	*httpApp
	sent    []atomic.Int64
	aborted atomic.Int32 // /hold responses whose write failed (the stream was reset)
}

const (
	holdChunk         = 16 << 10
	fairAttackStreams = 6
	fairVictimBytes   = 1 << 20
)

func startHoldApp(t *testing.T, streams, size int) *holdApp {
	h := &holdApp{httpApp: startHTTPApp(t), sent: make([]atomic.Int64, streams)}
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
				h.aborted.Add(1)
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

// stallStreams opens n requests for /hold on a new HTTP/2 connection to
// addr whose client announces a zero stream window and never opens it:
// the proxy can send none of their body.
func stallStreams(t *testing.T, addr string, n int) *h2client {
	h := dialH2(t, addr)
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	}))
	for i := range n {
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
	cfg := fullWindowConfig()
	window := int64(cfg.H2StreamWindow)
	connWindow := int64(cfg.H2ConnectionWindow)
	require.Greater(t, fairAttackStreams*window, connWindow, "the stalled streams could hold the whole connection window")

	t.Run("inbound", func(t *testing.T) {
		app := startHoldApp(t, fairAttackStreams, 2<<20)
		_, addr := plainInboundWith(t, cfg, allowAll(t), app.httpApp)
		stallStreams(t, addr, fairAttackStreams)
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
		app := startHoldApp(t, fairAttackStreams, 3<<20)
		full := func(c *dataplane.Config) { *c = fullWindowConfig() }
		hp := startHTTPPair(t, httpPairOptions{app: app.httpApp, cfgA: full, cfgB: full})
		stallStreams(t, hp.clientAddr, fairAttackStreams)
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

// TestUnreadResponsesPastTheUpstreamBufferLimitAreReset: responses nobody
// reads hold a stream window each in the proxy's HTTP/2 client; past
// the connection's buffer limit (twice the connection window, 8 MiB)
// the one read least recently is dropped and its upstream stream reset
// (the application's write fails), so that what one pooled connection
// holds stays bounded, and the other clients on it are still served.
// (Toward the stalled client the proxy's handler is still blocked in its
// write to a stream with no window: it learns of the drop when it reads
// the upstream body next, so that stream ends when its client goes.)
func TestUnreadResponsesPastTheUpstreamBufferLimitAreReset(t *testing.T) {
	configured := fullWindowConfig()
	// WEFT_PROXY_HTTP2_BUFFER_LIMIT: with 3 windows, 7 stalled responses
	// (under the default's 8 MiB) are past the limit, so drops show the
	// setting is what counts.
	configured.H2BufferLimit = 3 * int64(configured.H2StreamWindow)
	for name, cfg := range map[string]dataplane.Config{"default": fullWindowConfig(), "configured": configured} {
		t.Run(name, func(t *testing.T) {
			limit := 2 * int64(cfg.H2ConnectionWindow)
			if cfg.H2BufferLimit > 0 {
				limit = cfg.H2BufferLimit
			}
			// Enough stalled responses to hold more than the limit.
			streams := int(limit/int64(cfg.H2StreamWindow)) + 4
			app := startHoldApp(t, streams, 2<<20)
			r, addr := plainInboundWith(t, cfg, allowAll(t), app.httpApp)
			stallStreams(t, addr, streams)
			dropped := func() float64 {
				return r.metric(t, "http_protocol_errors_total", `direction="client"`, `reason="http2-buffer_limit"`)
			}
			testutil.Eventually(t, 10*time.Second, func() bool { return dropped() > 0 }, "the buffer limit drops a stalled response")

			n, err := victimGet(t, addr)
			require.NoError(t, err)
			assert.Equal(t, fairVictimBytes, n)
			assert.EqualValues(t, 1, app.accepted.Load(), "one upstream connection carried them all")
			testutil.Eventually(t, 10*time.Second, func() bool { return app.aborted.Load() > 0 },
				"a dropped response's stream is reset upstream: the application's write fails")
			var held int64
			for i := range app.sent {
				held += app.sent[i].Load()
			}
			t.Logf("the application sent %d bytes of stalled responses; %v dropped", held, dropped())
		})
	}
}

// fullWindowConfig is testConfig with response streams that start at
// the whole stream window: an unread response then holds all of it at
// once, the most it can hold (by default it holds the initial window,
// less), which is what the attacks on a shared connection need.
func fullWindowConfig() dataplane.Config {
	cfg := testConfig()
	cfg.H2InitialStreamWindow = cfg.H2StreamWindow
	return cfg
}
