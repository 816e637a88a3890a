package dataplane_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
)

// h2client is a raw HTTP/2 client built on x/net's Framer, for sending
// what a well-behaved client never would.
type h2client struct {
	t      *testing.T
	c      net.Conn
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	mu     sync.Mutex
	frames []http2.Frame
	closed chan struct{} // closed when the server ended the connection
	err    error
}

func dialH2(t *testing.T, addr string) *h2client {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	h := &h2client{t: t, c: c, closed: make(chan struct{})}
	h.fr = http2.NewFramer(c, c)
	h.fr.AllowIllegalWrites = true
	h.enc = hpack.NewEncoder(&h.hbuf)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, h.fr.WriteSettings())
	rd := http2.NewFramer(io.Discard, c)
	rd.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rd.MaxHeaderListSize = 1 << 20
	go func() {
		defer close(h.closed)
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				h.mu.Lock()
				h.err = err
				h.mu.Unlock()
				return
			}
			h.mu.Lock()
			h.frames = append(h.frames, f)
			h.mu.Unlock()
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				h.mu.Lock()
				_ = h.fr.WriteSettingsAck()
				h.mu.Unlock()
			}
		}
	}()
	return h
}

// block encodes header fields; extra are appended after the pseudo
// headers of a GET.
func (h *h2client) block(path string, extra ...string) []byte {
	h.hbuf.Reset()
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "web"}, {":path", path}} {
		h.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return append([]byte(nil), h.hbuf.Bytes()...)
}

// write runs f under the write lock; it reports false once writing fails
// (the server closed the connection).
func (h *h2client) write(f func(fr *http2.Framer) error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return f(h.fr) == nil
}

// waitClosed reports whether the server ended the connection within d.
func (h *h2client) waitClosed(d time.Duration) bool {
	select {
	case <-h.closed:
		return true
	case <-time.After(d):
		return false
	}
}

func (h *h2client) goAway() *http2.GoAwayFrame {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if g, ok := f.(*http2.GoAwayFrame); ok {
			return g
		}
	}
	return nil
}

func (h *h2client) responseStatus(stream uint32) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if m, ok := f.(*http2.MetaHeadersFrame); ok && m.StreamID == stream {
			return m.PseudoValue("status")
		}
	}
	return ""
}

func (h *h2client) resetCode(stream uint32) (http2.ErrCode, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.frames {
		if r, ok := f.(*http2.RSTStreamFrame); ok && r.StreamID == stream {
			return r.ErrCode, true
		}
	}
	return 0, false
}

// h2Target is a client proxy whose mapped listener accepts prior-knowledge
// HTTP/2, in front of an HTTP application.
func h2Target(t *testing.T) (*httpPair, string) {
	hp := startHTTPPair(t, httpPairOptions{})
	return hp, hp.clientAddr
}

func settleGoroutines(limit int) int {
	var n int
	for i := 0; i < 100; i++ {
		runtime.GC()
		n = runtime.NumGoroutine()
		if n <= limit {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
	return n
}

func TestRapidResetClosesTheConnectionAndCancelsUpstreamWork(t *testing.T) {
	// T11 (CVE-2023-44487).
	hp, addr := h2Target(t)
	base := runtime.NumGoroutine()
	h := dialH2(t, addr)
	sent := 0
	for id := uint32(1); id < 20000; id += 2 {
		ok := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/sleep?d=5s"), EndStream: true, EndHeaders: true}); err != nil {
				return err
			}
			return fr.WriteRSTStream(id, http2.ErrCodeCancel)
		})
		if !ok {
			break
		}
		sent++
	}
	require.True(t, h.waitClosed(5*time.Second), "the connection is closed after the reset budget")
	t.Logf("the client wrote %d HEADERS+RST_STREAM pairs before the connection ended (socket buffers take many)", sent)
	assert.Less(t, int(hp.app.requests.Load()), 500, "only a bounded number of requests went upstream")
	assert.Positive(t, hp.a.metric(t, "http_protocol_errors_total", `reason="http2-rapid-reset"`))
	n := settleGoroutines(base + 20)
	assert.LessOrEqual(t, n, base+20, "goroutines return to their baseline once cancelled upstream work ends")
}

func TestContinuationFloodClosesTheConnection(t *testing.T) {
	// T12 (CVE-2023-45288): HEADERS without END_HEADERS, then endless
	// CONTINUATION frames, empty or full of Huffman-coded bytes.
	for name, frag := range map[string][]byte{"empty": nil, "huffman": bytes.Repeat([]byte{0xff}, 4096)} {
		t.Run(name, func(t *testing.T) {
			_, addr := h2Target(t)
			h := dialH2(t, addr)
			h.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("/"), EndStream: true, EndHeaders: false})
			})
			for i := 0; i < 100000; i++ {
				if !h.write(func(fr *http2.Framer) error { return fr.WriteContinuation(1, false, frag) }) {
					break
				}
			}
			assert.True(t, h.waitClosed(5*time.Second), "closed after the header budget")
		})
	}
}

func TestOversizedHeaderListsAreRefused(t *testing.T) {
	// T13: a header list above the limit made of many fields (431), one
	// field larger than the limit (the decoder refuses the string: the
	// connection ends with COMPRESSION_ERROR), and an HPACK bomb (one
	// large entry in the dynamic table referenced many times: 431).
	writeBlock := func(h *h2client, id uint32, block []byte) {
		h.write(func(fr *http2.Framer) error {
			first := block[:min(len(block), 16000)]
			rest := block[len(first):]
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: true, EndHeaders: len(rest) == 0}); err != nil {
				return err
			}
			for len(rest) > 0 {
				n := min(len(rest), 16000)
				if err := fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
					return err
				}
				rest = rest[n:]
			}
			return nil
		})
	}
	waitStatus := func(h *h2client, id uint32) string {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if st := h.responseStatus(id); st != "" {
				return st
			}
			if _, reset := h.resetCode(id); reset {
				return "reset"
			}
			time.Sleep(20 * time.Millisecond)
		}
		return ""
	}

	hp, addr := h2Target(t)
	h := dialH2(t, addr)
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, "x-field", strings.Repeat("m", 2000))
	}
	writeBlock(h, 1, h.block("/", many...))
	assert.Equal(t, "431", waitStatus(h, 1), "many fields over the limit")

	bomb := h.block("/", "x-bomb", strings.Repeat("b", 3000))
	for i := 0; i < 100; i++ {
		bomb = append(bomb, 0x80|62) // the entry just added to the dynamic table
	}
	writeBlock(h, 3, bomb)
	assert.Equal(t, "431", waitStatus(h, 3), "an HPACK bomb decodes past the limit")
	assert.False(t, h.waitClosed(200*time.Millisecond), "the connection survives refused requests")
	assert.Zero(t, hp.app.requests.Load(), "nothing was forwarded")

	h2 := dialH2(t, addr)
	writeBlock(h2, 1, h2.block("/", "x-big", strings.Repeat("a", 100<<10)))
	require.True(t, h2.waitClosed(5*time.Second), "a single field over the limit ends the connection")
	if g := h2.goAway(); assert.NotNil(t, g) {
		assert.Equal(t, http2.ErrCodeCompression, g.ErrCode)
	}
}

func TestControlAndEmptyFrameFloodsCloseTheConnection(t *testing.T) {
	// T14.
	floods := map[string]func(h *h2client, i int) error{
		"settings": func(h *h2client, _ int) error {
			return h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
		},
		"ping": func(h *h2client, i int) error { return h.fr.WritePing(false, [8]byte{byte(i)}) },
		"priority": func(h *h2client, i int) error {
			return h.fr.WritePriority(uint32(2*i+1), http2.PriorityParam{StreamDep: uint32(2*i + 3), Weight: 1})
		},
		"empty data": func(h *h2client, i int) error {
			if i == 0 {
				return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("/echo"), EndHeaders: true})
			}
			return h.fr.WriteData(1, false, nil)
		},
	}
	for name, flood := range floods {
		t.Run(name, func(t *testing.T) {
			_, addr := h2Target(t)
			h := dialH2(t, addr)
			for i := 0; i < 200000; i++ {
				if !h.write(func(*http2.Framer) error { return flood(h, i) }) {
					break
				}
			}
			assert.True(t, h.waitClosed(10*time.Second), "the flood ends the connection")
		})
	}
}

func TestWindowUpdateOverflowIsAFlowControlError(t *testing.T) {
	// T14.
	_, addr := h2Target(t)
	h := dialH2(t, addr)
	h.write(func(fr *http2.Framer) error {
		if err := fr.WriteWindowUpdate(0, 1<<31-1); err != nil {
			return err
		}
		return fr.WriteWindowUpdate(0, 1<<31-1)
	})
	require.True(t, h.waitClosed(5*time.Second))
	g := h.goAway()
	require.NotNil(t, g, "the server says why")
	assert.Equal(t, http2.ErrCodeFlowControl, g.ErrCode)
}

func TestServerResetsCountInTheSameBudget(t *testing.T) {
	// T15 (MadeYouReset, CVE-2025-8671): frames that make the server reset
	// streams (WINDOW_UPDATE of 0 on an open stream).
	hp, addr := h2Target(t)
	h := dialH2(t, addr)
	for id := uint32(1); id < 20000; id += 2 {
		ok := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/sleep?d=5s"), EndHeaders: true}); err != nil {
				return err
			}
			return fr.WriteWindowUpdate(id, 0)
		})
		if !ok {
			break
		}
	}
	require.True(t, h.waitClosed(5*time.Second), "server-initiated resets exhaust the budget too")
	assert.Positive(t, hp.a.metric(t, "http_protocol_errors_total", `reason="http2-rapid-reset"`))
}

func TestAWellBehavedHTTP2ClientIsNotMistakenForAnAttacker(t *testing.T) {
	// Cancelling a few streams now and then is normal.
	hp, addr := h2Target(t)
	h := dialH2(t, addr)
	for id := uint32(1); id < 400; id += 2 {
		ok := h.write(func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/"), EndStream: true, EndHeaders: true}); err != nil {
				return err
			}
			if id%10 == 1 {
				return fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
			return nil
		})
		require.True(t, ok)
		time.Sleep(time.Millisecond)
	}
	assert.False(t, h.waitClosed(500*time.Millisecond), "the connection stays open")
	assert.Positive(t, hp.app.requests.Load())
	h.mu.Lock()
	err := h.err
	h.mu.Unlock()
	assert.False(t, errors.Is(err, io.EOF))
}

func TestDrainSendsGoAwayToHTTP2Clients(t *testing.T) {
	hp, addr := h2Target(t)
	h := dialH2(t, addr)
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h.block("/sleep?d=300ms"), EndStream: true, EndHeaders: true})
	}))
	testutil.Eventually(t, 10*time.Second, func() bool { return hp.app.requests.Load() == 1 }, "stream 1 reached the application")
	hp.a.cancel() // SIGTERM to the client proxy
	require.True(t, h.waitClosed(5*time.Second), "the connection ends once its stream is done")
	g := h.goAway()
	require.NotNil(t, g, "the client was told to go away")
	assert.Equal(t, http2.ErrCodeNo, g.ErrCode)
	assert.Equal(t, "200", h.responseStatus(1), "the stream in flight finished first")
}

func TestConnectionSpecificHeadersEndTheConnectionWhateverTheFraming(t *testing.T) {
	// RFC 9113 section 8.2.2 (h2spec 8.1.2.2), including header blocks in
	// padded HEADERS frames with a priority and split over CONTINUATION.
	_, addr := h2Target(t)
	h := dialH2(t, addr)
	good := h.block("/", "x-fine", "yes", "te", "trailers")
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: good, EndStream: true, EndHeaders: true,
			PadLength: 7, Priority: http2.PriorityParam{StreamDep: 0, Weight: 16}})
	}))
	deadline := time.Now().Add(5 * time.Second)
	for h.responseStatus(1) == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.Equal(t, "200", h.responseStatus(1), "a padded, prioritised, clean request is served")

	bad := h.block("/", "connection", "keep-alive")
	require.True(t, h.write(func(fr *http2.Framer) error {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: bad[:3], EndStream: true, PadLength: 2}); err != nil {
			return err
		}
		return fr.WriteContinuation(3, true, bad[3:])
	}))
	assert.True(t, h.waitClosed(5*time.Second), "a connection-specific field ends the connection")
	assert.Empty(t, h.responseStatus(3))
}

func TestCancellingLongLivedStreamsIsNotARapidReset(t *testing.T) {
	// Watches that clients cancel after a while are normal: only resets
	// of streams younger than a second count. A stream's age starts when
	// the proxy reads its HEADERS, before it forwards the request: once
	// the application has every request of a batch, waiting the guard's
	// window makes each stream older than it, however busy the machine.
	hp, addr := h2Target(t)
	h := dialH2(t, addr)
	seen := hp.app.requests.Load()
	ageAll := func(batch int32) {
		t.Helper()
		seen += batch
		testutil.Eventually(t, 20*time.Second, func() bool { return hp.app.requests.Load() >= seen }, "every stream of the batch reached the application")
		time.Sleep(time.Second + 100*time.Millisecond) // prematureWindow, plus clock granularity
	}
	var ids []uint32
	for id := uint32(1); len(ids) < 90; id += 2 {
		require.True(t, h.write(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/sleep?d=30s"), EndStream: true, EndHeaders: true})
		}))
		ids = append(ids, id)
	}
	ageAll(90)
	for _, id := range ids {
		require.True(t, h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }))
	}
	// 90 more, each reset after its stream lived a while.
	for round := 0; round < 2; round++ {
		ids = ids[:0]
		for id := uint32(1001 + 200*round); len(ids) < 60; id += 2 {
			require.True(t, h.write(func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.block("/sleep?d=30s"), EndStream: true, EndHeaders: true})
			}))
			ids = append(ids, id)
		}
		ageAll(60)
		for _, id := range ids {
			require.True(t, h.write(func(fr *http2.Framer) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }))
		}
	}
	assert.False(t, h.waitClosed(500*time.Millisecond), "210 cancelled long-lived streams keep the connection open")
}

func TestAClientThatWaitsForEachPingAckIsNotAFlood(t *testing.T) {
	// grpc-go's bandwidth estimator pings once per round trip while it
	// receives DATA, which on loopback is thousands of PINGs a second,
	// each after the previous acknowledgement; its keepalive pings a few
	// times a minute. The benchmark's grpc-go client was once cut for a
	// "control flood" at about 10,000 calls a second. This client does
	// both: 200 PINGs with no traffic (under the standing allowance of
	// 256), then 1,500 requests, each answered with DATA and followed by
	// one PING (earned by that DATA), each waiting for its ack.
	_, addr := h2Target(t)
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second)))
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	_, err = io.WriteString(c, http2.ClientPreface)
	require.NoError(t, err)
	require.NoError(t, fr.WriteSettings())

	// next reads one frame, answering the server's SETTINGS and failing
	// the test on GOAWAY.
	next := func(what string) http2.Frame {
		f, err := fr.ReadFrame()
		require.NoError(t, err, "%s: the connection ended", what)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, fr.WriteSettingsAck())
			}
		case *http2.GoAwayFrame:
			t.Fatalf("%s: GOAWAY %v", what, f.ErrCode)
		}
		return f
	}
	ping := func(what string, n int) {
		data := [8]byte{byte(n >> 8), byte(n)}
		require.NoError(t, fr.WritePing(false, data), what)
		for {
			if p, ok := next(what).(*http2.PingFrame); ok && p.IsAck() && p.Data == data {
				return
			}
		}
	}
	for i := 0; i < 200; i++ {
		ping(fmt.Sprintf("keepalive ping %d", i), i)
	}
	const requests = 1500
	for i := 0; i < requests; i++ {
		id := uint32(2*i + 1)
		what := fmt.Sprintf("request %d", i)
		hbuf.Reset()
		for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "web"}, {":path", "/status/200"}} {
			require.NoError(t, enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]}))
		}
		require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndStream: true, EndHeaders: true}), what)
		data := 0
		for ended := false; !ended; {
			switch f := next(what).(type) {
			case *http2.MetaHeadersFrame:
				ended = f.StreamID == id && f.StreamEnded()
			case *http2.DataFrame:
				if f.StreamID != id {
					continue
				}
				if n := len(f.Data()); n > 0 {
					data++
					require.NoError(t, fr.WriteWindowUpdate(0, uint32(n)), what)
				}
				ended = f.StreamEnded()
			case *http2.RSTStreamFrame:
				require.NotEqual(t, id, f.StreamID, "%s: reset %v", what, f.ErrCode)
			}
		}
		require.Positive(t, data, "%s: the response carried DATA", what)
		ping(what+": its ping", 200+i)
	}
}
