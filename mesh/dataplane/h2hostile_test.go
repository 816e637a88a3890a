package dataplane_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// Issue 27's findings against the proxy's own HTTP/2 server, each on real
// sockets: clients that do not read, and a PING flood over mesh TLS.

// dialDeafH2 opens prior-knowledge HTTP/2 to addr from a client that
// never reads: a small receive buffer and nothing draining it.
func dialDeafH2(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(4<<10))
	t.Cleanup(func() { c.Close() })
	_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, nil)
	fr.AllowIllegalWrites = true
	require.NoError(t, fr.WriteSettings())
	require.NoError(t, fr.WriteSettingsAck())
	return c, fr
}

// smallSendBuffers gives every accepted connection a small socket send
// buffer, so that the proxy's writes to a client that does not read get
// stuck after a few kilobytes rather than megabytes.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// deafTarget is a proxy whose mapped listener (prior-knowledge HTTP/2,
// small send buffers) leads to an unmeshed HTTP application.
func deafTarget(t *testing.T) (*httpApp, *running, string) {
	app := startHTTPApp(t)
	res := dataplane.NewMemoryResolver()
	target := fmt.Sprintf("web.shop.svc.cluster.local:%d", app.port())
	res.Set(target, dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), app.port())})
	mapped := testutil.Listen(t)
	ls := dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: smallSendBuffers{mapped}, Authority: target}}}
	r := startProxy(t, testConfig(), newPKI(t).identity(t, idA), res, nil, ls)
	return app, r, mapped.Addr().String()
}

// requestBlock encodes a GET of path with extra fields.
func requestBlock(path string, extra ...string) []byte {
	var buf writeBuffer
	enc := hpack.NewEncoder(&buf)
	fields := append([]string{":method", "GET", ":scheme", "http", ":authority", "web", ":path", path}, extra...)
	for i := 0; i+1 < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.b
}

type writeBuffer struct{ b []byte }

func (w *writeBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func TestAClientThatStopsReadingIsClosedWithItsQueueBounded(t *testing.T) {
	// Finding 1: HEADERS with an invalid field value, each answered with
	// RST_STREAM, from a client that never reads. The server queued one
	// reset per frame without bound; now the connection ends and what it
	// queued stays within the server's bound.
	// First a large response, with all the window it wants, that the
	// client does not read either: the proxy's write of it gets stuck,
	// and the resets pile up behind it (a reading guard never saw them).
	const attempts = 200000
	app, r, addr := deafTarget(t)
	_, fr := dialDeafH2(t, addr)
	require.NoError(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}))
	require.NoError(t, fr.WriteWindowUpdate(0, 1<<31-1-65535))
	require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/big?n=67108864"), EndStream: true, EndHeaders: true}))
	testutil.Eventually(t, 20*time.Second, func() bool { return app.requests.Load() == 1 }, "the large response is on its way")
	bad := requestBlock("/", "x-bad", "a\x00b")
	sent := 0
	for id := uint32(3); sent < attempts; id += 2 {
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: bad, EndStream: true, EndHeaders: true}) != nil {
			break
		}
		sent++
	}
	bytes, frames := queuedPeak()
	t.Logf("%d bad HEADERS written before the server closed; largest queue of any connection %d bytes, %d frames", sent, bytes, frames)
	assert.Less(t, sent, attempts, "the server ended the connection")
	assert.LessOrEqual(t, bytes, int64(queueBound), "no connection queued more than the bound")
	assert.LessOrEqual(t, frames, int64(queueBoundFrames))
	testutil.Eventually(t, 20*time.Second, func() bool {
		return r.metric(t, "http_protocol_errors_total", `reason="http2-rapid-reset"`) > 0 ||
			r.metric(t, "http_protocol_errors_total", `reason="http2-output-queue-full"`) > 0
	}, "the connection was ended for abuse")
}

func TestServerResetsOfAClientThatDoesNotReadCountInTheBudget(t *testing.T) {
	// Finding 2 (MadeYouReset against a client that does not read): a
	// WINDOW_UPDATE of 0 on each stream just opened makes the server
	// reset it. Each reset counts when the server decides it, so the
	// connection ends after about the budget and only about the budget
	// of requests reach the application.
	app, r, addr := deafTarget(t)
	_, fr := dialDeafH2(t, addr)
	require.NoError(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}))
	require.NoError(t, fr.WriteWindowUpdate(0, 1<<31-1-65535))
	require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/big?n=67108864"), EndStream: true, EndHeaders: true}))
	testutil.Eventually(t, 20*time.Second, func() bool { return app.requests.Load() == 1 }, "the large response is on its way")
	blk := requestBlock("/sleep?d=5s")
	sent := 0
	for id := uint32(3); id < 80000; id += 2 {
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true}) != nil ||
			fr.WriteWindowUpdate(id, 0) != nil {
			break
		}
		sent++
	}
	t.Logf("%d streams opened and reset before the connection ended; %d requests reached the application", sent, app.requests.Load())
	assert.Less(t, sent, 40000, "the server ended the connection")
	// Usually the reset budget ends it. On a busy machine the read loop
	// can instead become the goroutine that writes the queue (it flushes
	// its answers when no one else is writing), and the queue may hold the
	// stalled response's DATA: the loop then reads nothing more until the
	// write timeout (10 s) ends the connection. Either way the flood stops
	// being read, which the bound on requests below checks.
	testutil.Eventually(t, 20*time.Second, func() bool {
		return r.metric(t, "http_protocol_errors_total", `reason="http2-rapid-reset"`) > 0 ||
			r.metric(t, "http_protocol_errors_total", `reason="http2-write_timeout"`) > 0
	}, "the reset budget or the write timeout ended the connection")
	// The budget (100) plus the streams in flight to the application
	// when it was spent (at most MaxConcurrentStreams, 100).
	assert.LessOrEqual(t, int(app.requests.Load()), 1+2*dataplane.DefaultConfig().H2ResetBudget+int(dataplane.DefaultConfig().H2MaxConcurrentStreams))
}

func TestAPingFloodOverMeshTLSOneFramePerRecordEndsTheConnection(t *testing.T) {
	// Finding 6: one PING per TLS record from a peer over mesh TLS. The
	// count was made per read of the socket, and each read saw one frame;
	// the server's frame loop counts frames. The client reads (every
	// answer is taken), so only the flood count can end it.
	hp := startHTTPPair(t, httpPairOptions{})
	client := hp.pki.issuer.Leaf(t, testutil.CertOptions{Name: idA})
	c := dialTransport(t, hp.inB.Addr().String(), idB, rootsOf(hp.pki), &client.TLS, hp.app.port(), transport.HTTP2)
	require.NotNil(t, c)
	_ = c.SetDeadline(time.Now().Add(60 * time.Second)) // hang guard only
	_, err := io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(c, c) // every frame is one Write of the tls.Conn: one record
	require.NoError(t, fr.WriteSettings())
	var acks atomic.Int64
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
				acks.Add(1)
			}
		}
	}()
	const attempts = 1000000
	sent := 0
	start := time.Now()
	for ; sent < attempts; sent++ {
		if fr.WritePing(false, [8]byte{byte(sent), byte(sent >> 8)}) != nil {
			break
		}
	}
	<-readDone
	elapsed := time.Since(start)
	t.Logf("%d PINGs sent, %d answered in %s", sent, acks.Load(), elapsed)
	assert.Less(t, sent, attempts, "the flood ended the connection")
	// A PING is answered when the paced-PING bucket (256, drained 100 a
	// second) takes it, or, when it arrives while an earlier answer is
	// still unwritten (a busy writer), when the control-frame bucket
	// (1,000, drained 1,000 a second) does: what both buckets hold and
	// drain while the flood lasted, whatever the flood's length. On an
	// idle machine nearly every PING is a paced one.
	bound := 256 + 1000 + (100+1000)*elapsed.Seconds() + 1
	assert.LessOrEqual(t, acks.Load(), int64(bound), "the flood was cut once the PING buckets were spent")
	testutil.Eventually(t, 20*time.Second, func() bool {
		return hp.b.metric(t, "http_protocol_errors_total", `reason="http2-control-flood"`) > 0
	}, "the flood is counted as one")
}

func TestWindowUpdateFloodsEndTheConnection(t *testing.T) {
	// A weakness named with the findings: WINDOW_UPDATEs were never
	// counted. Those that give back no window the proxy used (on the
	// connection, or on a stream already closed) are control frames now.
	for name, flood := range map[string]func(fr *http2.Framer) error{
		"connection window": func(fr *http2.Framer) error { return fr.WriteWindowUpdate(0, 1) },
		"closed stream":     func(fr *http2.Framer) error { return fr.WriteWindowUpdate(1, 1<<20) },
	} {
		t.Run(name, func(t *testing.T) {
			hp, addr := h2Target(t)
			h := dialH2(t, addr)
			require.True(t, h.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("/"), EndStream: true, EndHeaders: true})
			}))
			testutil.Eventually(t, 20*time.Second, func() bool { return h.responseStatus(1) == "200" }, "stream 1 is answered and closed")
			sent := 0
			for ; sent < 200000; sent++ {
				if !h.write(flood) {
					break
				}
			}
			require.True(t, h.waitClosed(10*time.Second), "the flood ends the connection")
			t.Logf("%d WINDOW_UPDATEs written before the connection ended", sent)
			if g := h.goAway(); assert.NotNil(t, g) {
				assert.Equal(t, http2.ErrCodeEnhanceYourCalm, g.ErrCode)
			}
			assert.Positive(t, hp.a.metric(t, "http_protocol_errors_total", `reason="http2-control-flood"`))
		})
	}
}
