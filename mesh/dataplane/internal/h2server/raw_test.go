package h2server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
)

// rawClient speaks frames directly, to send what no real client would.
type rawClient struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	wmu  sync.Mutex
	enc  *hpack.Encoder
	ebuf bytes.Buffer

	mu     sync.Mutex
	frames []http2.Frame
	closed chan struct{}
}

func dialRaw(t *testing.T, addr string) *rawClient {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	h := &rawClient{t: t, c: c, closed: make(chan struct{})}
	h.fr = http2.NewFramer(c, c)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.ebuf)
	_, err = c.Write([]byte(clientPreface))
	require.NoError(t, err)
	require.NoError(t, h.fr.WriteSettings())
	go func() {
		defer close(h.closed)
		for {
			f, err := h.fr.ReadFrame()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.frames = append(h.frames, copyFrame(f))
			h.mu.Unlock()
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				h.write(func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
			}
		}
	}()
	return h
}

// copyFrame keeps what the tests look at (the Framer reuses frames).
func copyFrame(f http2.Frame) http2.Frame {
	switch f := f.(type) {
	case *http2.RSTStreamFrame:
		c := *f
		return &c
	case *http2.GoAwayFrame:
		return &http2.GoAwayFrame{FrameHeader: f.FrameHeader, LastStreamID: f.LastStreamID, ErrCode: f.ErrCode}
	case *http2.MetaHeadersFrame:
		return &http2.MetaHeadersFrame{HeadersFrame: &http2.HeadersFrame{FrameHeader: f.FrameHeader}, Fields: append([]hpack.HeaderField(nil), f.Fields...)}
	case *http2.DataFrame:
		return &http2.WindowUpdateFrame{FrameHeader: f.FrameHeader} // only the header matters
	case *http2.PingFrame:
		c := *f
		return &c
	}
	return nil
}

func (h *rawClient) write(fn func(*http2.Framer) error) bool {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = h.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return fn(h.fr) == nil
}

func (h *rawClient) block(fields ...string) []byte {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	h.ebuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = h.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), h.ebuf.Bytes()...)
}

func (h *rawClient) headers(id uint32, end bool, method, path string, extra ...string) bool {
	b := h.block(append([]string{":method", method, ":scheme", "http", ":authority", "x", ":path", path}, extra...)...)
	return h.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: end, EndHeaders: true})
	})
}

// waitFor waits for a frame matching ok.
func (h *rawClient) waitFor(ok func(http2.Frame) bool) http2.Frame {
	deadline := time.After(5 * time.Second)
	for {
		h.mu.Lock()
		for _, f := range h.frames {
			if f != nil && ok(f) {
				h.mu.Unlock()
				return f
			}
		}
		h.mu.Unlock()
		select {
		case <-deadline:
			return nil
		case <-h.closed:
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, f := range h.frames {
				if f != nil && ok(f) {
					return f
				}
			}
			return nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (h *rawClient) waitReset(id uint32) (http2.ErrCode, bool) {
	f := h.waitFor(func(f http2.Frame) bool {
		r, ok := f.(*http2.RSTStreamFrame)
		return ok && r.StreamID == id
	})
	if f == nil {
		return 0, false
	}
	return f.(*http2.RSTStreamFrame).ErrCode, true
}

func (h *rawClient) waitGoAway() *http2.GoAwayFrame {
	f := h.waitFor(func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
	if f == nil {
		return nil
	}
	return f.(*http2.GoAwayFrame)
}

func (h *rawClient) status(id uint32) string {
	f := h.waitFor(func(f http2.Frame) bool {
		m, ok := f.(*http2.MetaHeadersFrame)
		return ok && m.StreamID == id
	})
	if f == nil {
		return ""
	}
	for _, hf := range f.(*http2.MetaHeadersFrame).Fields {
		if hf.Name == ":status" {
			return hf.Value
		}
	}
	return ""
}

func TestMalformedRequestsGetTheRightErrors(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(c *Config) { c.MaxHeaderBytes = 4096 })
	cases := []struct {
		name   string
		fields []string
	}{
		{"no path", []string{":method", "GET", ":scheme", "http", ":authority", "x"}},
		{"upper-case name", []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/", "X-Up", "1"}},
		{"pseudo after regular", []string{":method", "GET", ":scheme", "http", "a", "b", ":path", "/"}},
		{"unknown pseudo", []string{":method", "GET", ":scheme", "http", ":path", "/", ":bogus", "1"}},
		{"content-length with END_STREAM", []string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/", "content-length", "3"}},
		{"bad scheme", []string{":method", "GET", ":scheme", "ftp", ":authority", "x", ":path", "/"}},
		{"relative path", []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "rel"}},
	}
	h := dialRaw(t, ts.addr)
	id := uint32(1)
	for _, tc := range cases {
		b := h.block(tc.fields...)
		require.True(t, h.write(func(fr *http2.Framer) error {
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: true, EndHeaders: true})
		}))
		code, ok := h.waitReset(id)
		if assert.True(t, ok, tc.name) {
			assert.Equal(t, http2.ErrCodeProtocol, code, tc.name)
		}
		id += 2
	}
	// The connection survives stream errors.
	h.headers(id, true, "GET", "/")
	assert.Equal(t, "200", h.status(id))

	// Too many header bytes: 431, the connection lives on.
	id += 2
	h.headers(id, true, "GET", "/", "x-big", string(bytes.Repeat([]byte("a"), 3000)), "x-big2", string(bytes.Repeat([]byte("b"), 3000)))
	assert.Equal(t, "431", h.status(id))
}

func TestConnectionSpecificFieldsEndTheConnection(t *testing.T) {
	// RFC 9113 section 8.2.2: such a request is malformed; no real client
	// sends one, so the connection ends (GOAWAY PROTOCOL_ERROR) rather
	// than the stream alone.
	for name, fields := range map[string][]string{
		"connection header":      {"connection", "close"},
		"te other than trailers": {"te", "gzip"},
	} {
		t.Run(name, func(t *testing.T) {
			var abuse atomic.Value
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(c *Config) {
				c.OnAbuse = func(reason string) { abuse.Store(reason) }
			})
			h := dialRaw(t, ts.addr)
			h.headers(1, true, "GET", "/", fields...)
			g := h.waitGoAway()
			require.NotNil(t, g)
			assert.Equal(t, http2.ErrCodeProtocol, g.ErrCode)
			<-h.closed
			testutil.Eventually(t, 10*time.Second, func() bool { return abuse.Load() == "http2-connection-header" }, "the abuse is reported")
		})
	}
}

func TestConnectionErrorsSendGoAwayWithTheirCode(t *testing.T) {
	cases := map[string]struct {
		send func(h *rawClient) bool
		code http2.ErrCode
	}{
		"even stream id": {func(h *rawClient) bool { return h.headers(2, true, "GET", "/") }, http2.ErrCodeProtocol},
		"data on an idle stream": {func(h *rawClient) bool {
			return h.write(func(fr *http2.Framer) error { return fr.WriteData(7, true, []byte("x")) })
		}, http2.ErrCodeProtocol},
		"window overflow": {func(h *rawClient) bool {
			return h.write(func(fr *http2.Framer) error {
				_ = fr.WriteWindowUpdate(0, 1<<31-1)
				return fr.WriteWindowUpdate(0, 1<<31-1)
			})
		}, http2.ErrCodeFlowControl},
		"push promise": {func(h *rawClient) bool {
			b := h.block(":method", "GET")
			return h.write(func(fr *http2.Framer) error {
				return fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: b, EndHeaders: true})
			})
		}, http2.ErrCodeProtocol},
		"frame too large": {func(h *rawClient) bool {
			h.headers(1, false, "POST", "/")
			return h.write(func(fr *http2.Framer) error {
				return fr.WriteData(1, false, make([]byte, 20000))
			})
		}, http2.ErrCodeFrameSize},
		"a stream id going down": {func(h *rawClient) bool {
			h.headers(5, true, "GET", "/")
			return h.headers(3, true, "GET", "/")
		}, http2.ErrCodeProtocol},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
			h := dialRaw(t, ts.addr)
			tc.send(h)
			g := h.waitGoAway()
			require.NotNil(t, g, "GOAWAY sent")
			assert.Equal(t, tc.code, g.ErrCode)
			select {
			case <-h.closed:
			case <-time.After(5 * time.Second):
				t.Fatal("the connection was not closed")
			}
		})
	}
}

func TestAWindowGrantedWhileTheWriterFlushesIsNotMissed(t *testing.T) {
	// A writer out of window flushes (releasing the connection's lock)
	// before it waits; a WINDOW_UPDATE processed during that flush must
	// not be lost. The client grants small windows back as soon as data
	// arrives, so that the race comes up at every stall.
	body := bytes.Repeat([]byte("w"), 200<<10)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}), nil)
	c, err := net.DialTimeout("tcp", ts.addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fr := http2.NewFramer(c, c)
	_, err = c.Write([]byte(clientPreface))
	require.NoError(t, err)
	require.NoError(t, fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000}))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for id := uint32(1); id <= 9; id += 2 {
		require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}))
		got := 0
		for ended := false; !ended; {
			f, err := fr.ReadFrame()
			require.NoError(t, err, "stream %d stalled after %d bytes", id, got)
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					require.NoError(t, fr.WriteSettingsAck())
				}
			case *http2.DataFrame:
				n := len(f.Data())
				got += n
				ended = f.StreamEnded()
				if n > 0 {
					require.NoError(t, fr.WriteWindowUpdate(0, uint32(n)))
					if !ended {
						require.NoError(t, fr.WriteWindowUpdate(id, uint32(n)))
					}
				}
			case *http2.HeadersFrame:
				ended = f.StreamEnded()
			}
		}
		assert.Equal(t, len(body), got)
	}
}

func TestHeadersOnAStreamTheClientSawEndIsAConnectionError(t *testing.T) {
	// The stream is forgotten before the flush that carries its end: a
	// client that sees END_STREAM and reuses the stream ID finds it
	// closed (connection error), not half-closed (stream error).
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	for i := 0; i < 5; i++ {
		h := dialRaw(t, ts.addr)
		require.True(t, h.headers(1, true, "GET", "/"))
		require.Equal(t, "200", h.status(1))
		require.True(t, h.headers(1, true, "GET", "/"))
		g := h.waitGoAway()
		require.NotNil(t, g, "round %d: GOAWAY", i)
		assert.Equal(t, http2.ErrCodeProtocol, g.ErrCode)
		_, reset := h.waitReset(1)
		assert.False(t, reset, "round %d: no stream error", i)
		h.c.Close()
	}
}

func TestAnIdleConnectionIsClosedWithGoAway(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(c *Config) {
		c.IdleTimeout = 100 * time.Millisecond
	})
	h := dialRaw(t, ts.addr)
	require.True(t, h.headers(1, true, "GET", "/"))
	require.Equal(t, "200", h.status(1))
	g := h.waitGoAway()
	require.NotNil(t, g, "GOAWAY once idle")
	assert.Equal(t, http2.ErrCodeNo, g.ErrCode)
	assert.Equal(t, uint32(1), g.LastStreamID)
	select {
	case <-h.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
}

func TestASilentClientIsPingedThenClosed(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(c *Config) {
		c.PingInterval, c.PingTimeout = 50*time.Millisecond, 50*time.Millisecond
	})
	h := dialRaw(t, ts.addr) // reads frames, never answers PING
	select {
	case <-h.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the silent connection was not closed")
	}
	assert.Positive(t, ts.errCount("ping_timeout"))
}

func TestAHandlerThatAbortsResetsItsStreamOnly(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
	}), nil)
	h := dialRaw(t, ts.addr)
	require.True(t, h.headers(1, true, "GET", "/abort"))
	code, ok := h.waitReset(1)
	require.True(t, ok, "the aborted stream is reset")
	assert.Equal(t, http2.ErrCodeInternal, code)
	require.True(t, h.headers(3, true, "GET", "/"))
	assert.Equal(t, "200", h.status(3), "the connection serves on")
}

func TestTheLastBodyReadReturnsEOFWithTheData(t *testing.T) {
	type result struct {
		n   int
		err error
	}
	got := make(chan result, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rr := r.Body.(interface{ ReadReady() bool })
		deadline := time.Now().Add(5 * time.Second)
		for !rr.ReadReady() && time.Now().Before(deadline) {
			runtime.Gosched() // the DATA frame (with END_STREAM) is on its way
		}
		buf := make([]byte, 64)
		n, err := r.Body.Read(buf)
		got <- result{n, err}
	}), nil)
	h := dialRaw(t, ts.addr)
	require.True(t, h.headers(1, false, "POST", "/"))
	require.True(t, h.write(func(fr *http2.Framer) error { return fr.WriteData(1, true, []byte("abc")) }))
	select {
	case r := <-got:
		assert.Equal(t, 3, r.n)
		assert.Equal(t, io.EOF, r.err, "io.EOF comes with the last data")
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not read")
	}
}

// A handler may look at its request's Trailer map (the declared keys)
// at any time; the values arrive in the map when the body's Read returns
// io.EOF, on the goroutine reading the body. Here the handler looks only
// after the read loop has taken the trailers (a later stream was
// answered) and before it reads the body: under -race, a read loop that
// filled the map itself is a race (the conformance suite caught one).
func TestRequestTrailersReachTheMapOnlyAtTheBodysEnd(t *testing.T) {
	look := make(chan struct{})
	type seen struct {
		declared      int
		before, after string
		err           error
	}
	got := make(chan seen, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/one" {
			return
		}
		select {
		case <-look:
		case <-time.After(5 * time.Second):
		}
		s := seen{declared: len(r.Trailer), before: r.Trailer.Get("X-Sum")}
		_, s.err = io.ReadAll(r.Body)
		s.after = r.Trailer.Get("X-Sum")
		got <- s
	}), nil)
	h := dialRaw(t, ts.addr)
	require.True(t, h.headers(1, false, "POST", "/one", "trailer", "x-sum"))
	require.True(t, h.write(func(fr *http2.Framer) error { return fr.WriteData(1, false, []byte("body")) }))
	tr := h.block("x-sum", "42")
	require.True(t, h.write(func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: tr, EndStream: true, EndHeaders: true})
	}))
	// Frames are read in order: once stream 3 is answered, stream 1's
	// trailers have been taken.
	require.True(t, h.headers(3, true, "GET", "/two"))
	require.Equal(t, "200", h.status(3))
	close(look)
	select {
	case s := <-got:
		require.NoError(t, s.err)
		assert.Equal(t, 1, s.declared, "the declared key is in the map from the start")
		assert.Empty(t, s.before, "no trailer value before the body's end")
		assert.Equal(t, "42", s.after)
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not finish")
	}
}
