package h2client_test

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// clientSettings reads frames until the client's SETTINGS and returns
// the initial stream window it announced (65535 when it announced none).
func clientSettings(rc *rawConn) (uint32, bool) {
	for {
		s, ok := readUntil[*http2.SettingsFrame](rc)
		if !ok {
			return 0, false
		}
		if s.IsAck() {
			continue
		}
		v, found := s.Value(http2.SettingInitialWindowSize)
		if !found {
			v = 65535
		}
		return v, true
	}
}

// TestAResponseNobodyReadsHoldsTheInitialWindowOnly: a proxy relays each
// response to a client that may stop reading. With a stream window of
// 1 MiB announced to every server, an abandoned download pulled a whole
// MiB through each proxy it crossed before anything held it back (issue
// 27, made-you-reset-outbound). The stream now starts at 256 KiB and
// grows only as its body is read: a server that sends one byte past the
// initial window of a response nobody reads overruns it.
func TestAResponseNobodyReadsHoldsTheInitialWindowOnly(t *testing.T) {
	const frame = 16 << 10
	type outcome struct {
		announced uint32
		updates   int    // stream WINDOW_UPDATEs seen before the overrun
		reset     uint32 // the client's RST_STREAM code after it
	}
	done := make(chan outcome, 1)
	srv := startRaw(t, nil, func(rc *rawConn) {
		var o outcome
		defer func() { done <- o }()
		var ok bool
		if o.announced, ok = clientSettings(rc); !ok {
			return
		}
		h, ok := readUntil[*http2.MetaHeadersFrame](rc)
		if !ok {
			return
		}
		rc.headers(h.StreamID, false, ":status", "200")
		data := make([]byte, frame)
		for left := int(o.announced); left > 0; left -= frame {
			_ = rc.fr.WriteData(h.StreamID, false, data[:min(left, frame)])
		}
		// The client answers the PING after it took every DATA before it:
		// any stream WINDOW_UPDATE it meant to send is sent by then.
		_ = rc.fr.WritePing(false, [8]byte{1})
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			if w, isW := f.(*http2.WindowUpdateFrame); isW && w.StreamID == h.StreamID {
				o.updates++
			}
			if p, isP := f.(*http2.PingFrame); isP && p.IsAck() {
				break
			}
		}
		_ = rc.fr.WriteData(h.StreamID, false, data[:1])
		for {
			r, ok := readUntil[*http2.RSTStreamFrame](rc)
			if !ok {
				return
			}
			if r.StreamID == h.StreamID {
				o.reset = uint32(r.ErrCode)
				return
			}
		}
	})
	cc := dialAddr(t, srv.addr, nil, h2client.WithKeepalive(0, 0)) // the default windows
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	var o outcome
	select {
	case o = <-done:
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("the raw server's script did not end")
	}
	assert.EqualValues(t, 256<<10, o.announced, "SETTINGS_INITIAL_WINDOW_SIZE")
	assert.Zero(t, o.updates, "the stream's window was given back though nothing read the body")
	assert.Equal(t, uint32(http2.ErrCodeFlowControl), o.reset, "a byte past the initial window of an unread response is refused")
}

// TestAResponseThatIsReadGrowsItsWindowToTheStreamWindow: a download
// that is read gets the whole stream window (1 MiB by default) within
// its first MiBs, and never more. The server sends as much as the
// windows it was granted allow; once the client has read everything,
// what it may still send is the client's window less what the client
// has read and not yet given back, which is under half the window.
func TestAResponseThatIsReadGrowsItsWindowToTheStreamWindow(t *testing.T) {
	const (
		frame = 16 << 10
		total = 8 << 20
	)
	read := make(chan struct{})
	type outcome struct {
		avail    int64 // stream window the server may still use at the end
		maxAvail int64
	}
	done := make(chan outcome, 1)
	srv := startRaw(t, nil, func(rc *rawConn) {
		var o outcome
		defer func() { done <- o }()
		initial, ok := clientSettings(rc)
		if !ok {
			return
		}
		var id uint32
		avail, conn := int64(initial), int64(65535)
		credit := func(f http2.Frame) {
			w, isW := f.(*http2.WindowUpdateFrame)
			switch {
			case !isW:
			case w.StreamID == 0:
				conn += int64(w.Increment)
			case w.StreamID == id:
				avail += int64(w.Increment)
				o.maxAvail = max(o.maxAvail, avail)
			}
		}
		// The connection's WINDOW_UPDATE comes before the request.
		for id == 0 {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			credit(f)
			if h, isH := f.(*http2.MetaHeadersFrame); isH {
				id = h.StreamID
			}
		}
		rc.headers(id, false, ":status", "200")
		data := make([]byte, frame)
		for sent := 0; sent < total; {
			n := int64(min(frame, total-sent))
			if avail < n || conn < n {
				f, err := rc.fr.ReadFrame()
				if err != nil {
					return
				}
				credit(f)
				continue
			}
			_ = rc.fr.WriteData(id, false, data[:n])
			avail -= n
			conn -= n
			sent += int(n)
		}
		select {
		case <-read:
		case <-time.After(testutil.DefaultTimeout):
			return
		}
		// Everything was read: the client's last WINDOW_UPDATEs were sent
		// before its answer to this PING.
		_ = rc.fr.WritePing(false, [8]byte{2})
		for {
			f, err := rc.fr.ReadFrame()
			if err != nil {
				return
			}
			credit(f)
			if p, isP := f.(*http2.PingFrame); isP && p.IsAck() {
				break
			}
		}
		o.avail = avail
		_ = rc.fr.WriteData(id, true, nil)
	})
	cc := dialAddr(t, srv.addr, nil, h2client.WithKeepalive(0, 0))
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	n, err := io.CopyN(io.Discard, resp.Body, total)
	require.NoError(t, err)
	require.EqualValues(t, total, n)
	close(read)
	var o outcome
	select {
	case o = <-done:
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("the raw server's script did not end")
	}
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	const window = 1 << 20
	assert.Greater(t, o.avail, int64(window/2), "the window did not grow to the stream window (a 256 or 512 KiB window leaves at most half a MiB)")
	assert.LessOrEqual(t, o.avail, int64(window))
	assert.LessOrEqual(t, o.maxAvail, int64(window), "the window grew past the stream window")
}

// TestTheInitialStreamWindowIsCappedByTheStreamWindow: a stream window
// set below the initial window's default is where streams start, and
// they never grow.
func TestTheInitialStreamWindowIsCappedByTheStreamWindow(t *testing.T) {
	got := make(chan uint32, 1)
	srv := startRaw(t, nil, func(rc *rawConn) {
		v, _ := clientSettings(rc)
		got <- v
		rc.waitClosed()
	})
	cc := dialAddr(t, srv.addr, nil, h2client.WithWindows(100<<10, 1<<20), h2client.WithKeepalive(0, 0))
	select {
	case v := <-got:
		assert.EqualValues(t, 100<<10, v)
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("no SETTINGS from the client")
	}
	cc.Close()
}
