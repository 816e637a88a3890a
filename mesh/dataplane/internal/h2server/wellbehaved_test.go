package h2server

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A reader's WINDOW_UPDATEs give back window the server's DATA used;
// they are no flood however many arrive at once. These tests drive the
// server with a synchronous client that reads every response to its end
// before giving any stream window back, then returns it in a burst, as a
// client whose reader lags does: on streams the server has already
// closed. The bucket for control frames holds 1000; each burst is
// several times that, sent faster than it could drain.

// syncClient is a client that writes a frame and reads the answers
// itself, on the test's goroutine.
type syncClient struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	ebuf bytes.Buffer
}

func dialSync(t *testing.T, addr string, settings ...http2.Setting) *syncClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(60*time.Second))) // hang guard only
	sc := &syncClient{t: t, c: c, fr: http2.NewFramer(c, c)}
	sc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	sc.enc = hpack.NewEncoder(&sc.ebuf)
	_, err = io.WriteString(c, clientPreface)
	require.NoError(t, err)
	require.NoError(t, sc.fr.WriteSettings(settings...))
	return sc
}

// get opens stream id for path.
func (sc *syncClient) get(id uint32, path string) {
	sc.ebuf.Reset()
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", path}} {
		_ = sc.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	require.NoError(sc.t, sc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: sc.ebuf.Bytes(), EndStream: true, EndHeaders: true}))
}

// readUntil reads frames until done says so, answering SETTINGS; each
// DATA frame's stream and length go to data. A GOAWAY or the end of the
// connection fails the test.
func (sc *syncClient) readUntil(what string, data func(id uint32, n int, end bool), done func(http2.Frame) bool) {
	sc.t.Helper()
	for {
		f, err := sc.fr.ReadFrame()
		require.NoError(sc.t, err, "%s: the connection ended", what)
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(sc.t, sc.fr.WriteSettingsAck())
			}
		case *http2.GoAwayFrame:
			sc.t.Fatalf("%s: GOAWAY %v", what, f.ErrCode)
		case *http2.DataFrame:
			if data != nil {
				data(f.StreamID, len(f.Data()), f.StreamEnded())
			}
		}
		if done(f) {
			return
		}
	}
}

// windowUpdate writes a WINDOW_UPDATE; when the server has ended the
// connection, the test fails with its GOAWAY.
func (sc *syncClient) windowUpdate(what string, id, inc uint32) {
	sc.t.Helper()
	if err := sc.fr.WriteWindowUpdate(id, inc); err != nil {
		sc.readUntil(what, nil, func(http2.Frame) bool { return false })
	}
}

// alive checks with a PING that the connection still serves.
func (sc *syncClient) alive(what string) {
	sc.t.Helper()
	require.NoError(sc.t, sc.fr.WritePing(false, [8]byte{'a', 'l', 'i', 'v', 'e'}))
	sc.readUntil(what, nil, func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'a', 'l', 'i', 'v', 'e'}
	})
}

// sizedHandler answers /n/BYTES with BYTES bytes in one Write.
func sizedHandler(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/n/"))
	_, _ = w.Write(bytes.Repeat([]byte{'x'}, n))
}

func TestWindowUpdatesOnClosedStreamsReturningWhatTheyReadAreNotAFlood(t *testing.T) {
	// x/net's HTTP/2 client gives a stream's window back every 4 KiB its
	// reader takes, usually after the server sent the stream's last
	// frame and forgot it. The attack benchmark saw such clients (64 KiB
	// responses, 200 a second) closed for a "control flood".
	abuse := make(chan string, 1)
	ts := startServer(t, http.HandlerFunc(sizedHandler), func(c *Config) { c.OnAbuse = func(r string) { abuse <- r } })
	sc := dialSync(t, ts.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	require.NoError(t, sc.fr.WriteWindowUpdate(0, 1<<20)) // room for a whole response

	const (
		streams = 300
		size    = 64 << 10
		step    = 4 << 10
	)
	for i := range streams {
		id := uint32(2*i + 1)
		sc.get(id, "/n/"+strconv.Itoa(size))
		got := 0
		sc.readUntil("stream "+strconv.Itoa(int(id)), func(sid uint32, n int, _ bool) {
			if sid == id {
				got += n
			}
		}, func(f http2.Frame) bool {
			return f.Header().StreamID == id && f.Header().Flags.Has(http2.FlagDataEndStream)
		})
		require.Equal(t, size, got)
		// The connection's window comes back at once (free: it restores
		// what the server used, in one step of 64 KiB).
		require.NoError(t, sc.fr.WriteWindowUpdate(0, uint32(got)))
	}
	// Each stream's window, 4 KiB at a time: 16 per stream, 4800 on
	// closed streams in one burst.
	for i := range streams {
		for range size / step {
			sc.windowUpdate("the streams' windows", uint32(2*i+1), step)
		}
	}
	sc.alive("after the streams' windows came back")
	select {
	case r := <-abuse:
		t.Fatalf("ended for abuse: %s", r)
	default:
	}

	// Beyond what the server used, the same frames are a flood again:
	// updates on closed streams restoring nothing are control frames.
	sent := 0
	for ; sent < 5000; sent++ {
		if sc.fr.WriteWindowUpdate(1, step) != nil {
			break
		}
	}
	select {
	case r := <-abuse:
		assert.Equal(t, "http2-control-flood", r)
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatalf("%d updates restoring nothing did not end the connection", sent)
	}
}

func TestSmallWindowUpdatesOnePerDataFrameAreNotAFlood(t *testing.T) {
	// grpc-go gives back what it received on the connection (often a few
	// bytes) before each bandwidth-estimator PING, once per DATA frame at
	// most; a client may also return each frame's bytes as it takes them.
	// Steps under 1 KiB that leave window in flight are free while DATA
	// frames the server sent earned them.
	abuse := make(chan string, 1)
	ts := startServer(t, http.HandlerFunc(sizedHandler), func(c *Config) { c.OnAbuse = func(r string) { abuse <- r } })
	sc := dialSync(t, ts.addr)
	// A large connection window up front (one control frame: it raises
	// the window past what was used).
	require.NoError(t, sc.fr.WriteWindowUpdate(0, 1<<30))

	const (
		streams = 3000
		batch   = 100 // MaxConcurrentStreams
		size    = 100
	)
	var frames []int // each DATA frame's length, in arrival order
	for first := 0; first < streams; first += batch {
		open := 0
		for i := first; i < first+batch; i++ {
			sc.get(uint32(2*i+1), "/n/"+strconv.Itoa(size))
			open++
		}
		sc.readUntil("batch "+strconv.Itoa(first/batch), func(_ uint32, n int, end bool) {
			if n > 0 {
				frames = append(frames, n)
			}
			if end {
				open--
			}
		}, func(http2.Frame) bool { return open == 0 })
	}
	require.Len(t, frames, streams, "one DATA frame per response")
	// Every frame's bytes back on the connection, one WINDOW_UPDATE each,
	// in one burst of 3000.
	for _, n := range frames {
		sc.windowUpdate("the small window updates", 0, uint32(n))
	}
	sc.alive("after the small window updates")
	select {
	case r := <-abuse:
		t.Fatalf("ended for abuse: %s", r)
	default:
	}
}
