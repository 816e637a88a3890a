package h2client_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// A server that breaks the protocol gets a clear error on the request,
// a reset or GOAWAY with the right code, a counted class, and no panic
// or leaked goroutine.
func TestServersThatBreakTheProtocolGetClearErrorsAndNoLeak(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	cases := []struct {
		name     string
		opts     []h2client.Option
		settings []http2.Setting
		script   func(rc *rawConn, id uint32)
		inBody   bool   // the error comes when reading the body
		waitEnd  bool   // read the body only once the stream ended (reading returns window)
		wantErr  string // in the request's error
		class    string // counted
		goAway   http2.ErrCode
	}{
		{name: "status is not a number", wantErr: "malformed response status", class: "bad_status",
			script: func(rc *rawConn, id uint32) { rc.headers(id, true, ":status", "2x0") }},
		{name: "status is missing", wantErr: "malformed response status", class: "bad_status",
			script: func(rc *rawConn, id uint32) { rc.headers(id, true, "content-type", "text/plain") }},
		{name: "header name in upper case", wantErr: "malformed response", class: "stream_protocol",
			script: func(rc *rawConn, id uint32) { rc.headers(id, true, ":status", "200", "X-Upper", "v") }},
		{name: "header list over the limit", opts: []h2client.Option{h2client.WithMaxHeaderBytes(4096)},
			wantErr: "header list over the limit", class: "header_list_too_large",
			script: func(rc *rawConn, id uint32) {
				kv := []string{":status", "200"}
				for i := range 80 {
					kv = append(kv, "x-field-"+strings.Repeat("n", i%10), strings.Repeat("v", 40))
				}
				rc.headers(id, true, kv...)
			}},
		{name: "header value longer than the whole limit", opts: []h2client.Option{h2client.WithMaxHeaderBytes(4096)},
			wantErr: "COMPRESSION", class: "conn_compression", goAway: http2.ErrCodeCompression,
			script: func(rc *rawConn, id uint32) { rc.headers(id, true, ":status", "200", "x-big", big) }},
		{name: "informational flood", wantErr: "more than 16 informational", class: "too_many_1xx",
			script: func(rc *rawConn, id uint32) {
				for range 17 {
					rc.headers(id, false, ":status", "103")
				}
			}},
		{name: "101 over HTTP/2", wantErr: "101", class: "bad_1xx",
			script: func(rc *rawConn, id uint32) { rc.headers(id, false, ":status", "101") }},
		{name: "DATA before the headers", wantErr: "DATA before the response headers", class: "data_before_headers",
			script: func(rc *rawConn, id uint32) { _ = rc.fr.WriteData(id, true, []byte("x")) }},
		{name: "pseudo-header in trailers", inBody: true, wantErr: "pseudo-header field in trailers", class: "bad_trailers",
			script: func(rc *rawConn, id uint32) {
				rc.headers(id, false, ":status", "200")
				rc.headers(id, true, ":status", "200")
			}},
		{name: "trailers without END_STREAM", inBody: true, wantErr: "trailers without END_STREAM", class: "bad_trailers",
			script: func(rc *rawConn, id uint32) {
				rc.headers(id, false, ":status", "200")
				rc.headers(id, false, "grpc-status", "0")
			}},
		{name: "stream window overrun", opts: []h2client.Option{h2client.WithWindows(65535, 1<<20)}, inBody: true, waitEnd: true,
			wantErr: "beyond the stream window", class: "stream_flow_overflow",
			script: func(rc *rawConn, id uint32) {
				rc.headers(id, false, ":status", "200")
				for range 5 {
					_ = rc.fr.WriteData(id, false, make([]byte, 16<<10))
				}
			}},
		{name: "connection window overrun", opts: []h2client.Option{h2client.WithWindows(1<<20, 65535)}, inBody: true, waitEnd: true,
			wantErr: "FLOW_CONTROL", class: "conn_flow_overflow", goAway: http2.ErrCodeFlowControl,
			script: func(rc *rawConn, id uint32) {
				// Received bytes are given back to the connection
				// window once half of it came: 30000 are not, and
				// 40000 more overrun it.
				rc.headers(id, false, ":status", "200")
				_ = rc.fr.WriteData(id, false, make([]byte, 30000))
				_ = rc.fr.WriteData(id, false, make([]byte, 40000))
			}},
		{name: "connection send window overflow", wantErr: "FLOW_CONTROL", class: "conn_window_overflow", goAway: http2.ErrCodeFlowControl,
			script: func(rc *rawConn, id uint32) { _ = rc.fr.WriteWindowUpdate(0, 1<<31-1) }},
		{name: "stream send window overflow", wantErr: "overflows the stream window", class: "stream_window_overflow",
			script: func(rc *rawConn, id uint32) { _ = rc.fr.WriteWindowUpdate(id, 1<<31-1) }},
		{name: "push promise", wantErr: "PUSH_PROMISE", class: "push_promise", goAway: http2.ErrCodeProtocol,
			script: func(rc *rawConn, id uint32) {
				_ = rc.fr.WritePushPromise(http2.PushPromiseParam{StreamID: id, PromiseID: 2, BlockFragment: rc.block(":method", "GET"), EndHeaders: true})
			}},
		{name: "reset of a stream never opened", wantErr: "RST_STREAM on a stream never opened", class: "rst_idle_stream", goAway: http2.ErrCodeProtocol,
			script: func(rc *rawConn, id uint32) { _ = rc.fr.WriteRSTStream(99, http2.ErrCodeCancel) }},
		{name: "headers on a stream never opened", wantErr: "HEADERS on a stream never opened", class: "headers_idle_stream", goAway: http2.ErrCodeProtocol,
			script: func(rc *rawConn, id uint32) { rc.headers(101, true, ":status", "200") }},
		{name: "invalid frame size setting", wantErr: "PROTOCOL", class: "bad_settings", goAway: http2.ErrCodeProtocol,
			script: func(rc *rawConn, id uint32) {
				_ = rc.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1})
			}},
		{name: "frame over the read limit", inBody: true, wantErr: "FRAME_SIZE", class: "frame_too_large", goAway: http2.ErrCodeFrameSize,
			script: func(rc *rawConn, id uint32) {
				rc.headers(id, false, ":status", "200")
				_ = rc.fr.WriteRawFrame(http2.FrameData, 0, id, make([]byte, 70<<10))
			}},
		{name: "garbage instead of a header block", wantErr: "COMPRESSION", class: "conn_compression", goAway: http2.ErrCodeCompression,
			script: func(rc *rawConn, id uint32) {
				_ = rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotGoAway := make(chan *http2.GoAwayFrame, 1)
			srv := startRaw(t, tc.settings, func(rc *rawConn) {
				h, ok := readUntil[*http2.MetaHeadersFrame](rc)
				if !ok {
					gotGoAway <- nil
					return
				}
				tc.script(rc, h.StreamID)
				gotGoAway <- rc.waitClosed()
			})
			var mu sync.Mutex
			classes := map[string]int{}
			opts := append([]h2client.Option{h2client.WithCountError(func(c string) {
				mu.Lock()
				classes[c]++
				mu.Unlock()
			})}, tc.opts...)
			cc := dialAddr(t, srv.addr, nil, opts...)
			resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
			if tc.inBody {
				require.NoError(t, err)
				if tc.waitEnd {
					require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Streams == 0 }))
				}
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			mu.Lock()
			assert.Positive(t, classes[tc.class], "classes counted: %v", classes)
			mu.Unlock()
			if tc.goAway != 0 {
				require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closed }))
				ga := recv(t, gotGoAway)
				require.NotNil(t, ga, "the client says why in a GOAWAY")
				assert.Equal(t, tc.goAway, ga.ErrCode)
			}
			noClientGoroutinesAfter(t, cc)
		})
	}
}

func TestGoAwayFailsOnlyTheStreamsAboveTheLastOneAsUnprocessed(t *testing.T) {
	srv := startRaw(t, nil, func(rc *rawConn) {
		var ids []uint32
		for len(ids) < 2 {
			h, ok := readUntil[*http2.MetaHeadersFrame](rc)
			if !ok {
				return
			}
			ids = append(ids, h.StreamID)
		}
		_ = rc.fr.WriteGoAway(ids[0], http2.ErrCodeNo, nil)
		rc.headers(ids[0], false, ":status", "200")
		_ = rc.fr.WriteData(ids[0], true, []byte("kept"))
		rc.waitClosed()
	})
	cc := dialAddr(t, srv.addr, nil)
	type result struct {
		body string
		err  error
	}
	results := make(chan result, 2)
	send := func() {
		resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
		if err != nil {
			results <- result{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		results <- result{string(b), err}
	}
	go send()
	// The second request only once the first is on the wire, so that
	// stream ids follow the order.
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Streams == 1 }))
	go send()
	var ok, refused int
	for range 2 {
		r := recv(t, results)
		switch {
		case r.err == nil:
			assert.Equal(t, "kept", r.body)
			ok++
		case errors.Is(r.err, h2client.ErrUnprocessed):
			refused++
		default:
			t.Errorf("unexpected error: %v", r.err)
		}
	}
	assert.Equal(t, 1, ok)
	assert.Equal(t, 1, refused)
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closed }),
		"the connection closes once its last stream ended")
	noClientGoroutinesAfter(t, cc)
}

func TestRefusedStreamIsUnprocessedAndKeepsItsCode(t *testing.T) {
	srv := startRaw(t, nil, func(rc *rawConn) {
		h, ok := readUntil[*http2.MetaHeadersFrame](rc)
		if !ok {
			return
		}
		_ = rc.fr.WriteRSTStream(h.StreamID, http2.ErrCodeRefusedStream)
		h, ok = readUntil[*http2.MetaHeadersFrame](rc)
		if !ok {
			return
		}
		_ = rc.fr.WriteRSTStream(h.StreamID, http2.ErrCodeInternal)
		rc.waitClosed()
	})
	cc := dialAddr(t, srv.addr, nil)
	_, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	var se http2.StreamError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http2.ErrCodeRefusedStream, se.Code)

	_, err = cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http2.ErrCodeInternal, se.Code)
	assert.NotErrorIs(t, err, h2client.ErrUnprocessed, "an INTERNAL_ERROR reset may have been processed")
	assert.False(t, cc.State().Closing, "a stream reset leaves the connection usable")
	noClientGoroutinesAfter(t, cc)
}

func TestAConnectionLostMidResponseFailsTheBodyRead(t *testing.T) {
	srv := startRaw(t, nil, func(rc *rawConn) {
		h, ok := readUntil[*http2.MetaHeadersFrame](rc)
		if !ok {
			return
		}
		rc.headers(h.StreamID, false, ":status", "200")
		_ = rc.fr.WriteData(h.StreamID, false, []byte("part"))
		rc.c.Close()
	})
	cc := dialAddr(t, srv.addr, nil)
	resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	assert.Equal(t, "part", string(b))
	require.ErrorContains(t, err, "connection lost")
	assert.NotErrorIs(t, err, h2client.ErrUnprocessed)
	resp.Body.Close()
	require.True(t, testutil.Poll(testutil.Context(t, 0), func() bool { return cc.State().Closed }))
	_, err = cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	noClientGoroutinesAfter(t, cc)
}

// Random frames (random types, flags, streams and payloads, after a valid
// response head) end in an error or a response, never a panic, a hang or
// a leaked goroutine.
func TestRandomFramesFromTheServerNeverPanicOrHang(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 16))
			srv := startRaw(t, nil, func(rc *rawConn) {
				h, ok := readUntil[*http2.MetaHeadersFrame](rc)
				if !ok {
					return
				}
				if rng.IntN(2) == 0 {
					rc.headers(h.StreamID, false, ":status", "200")
				}
				ids := []uint32{0, h.StreamID, h.StreamID + 2, 2, 1 << 30}
				for range 1 + rng.IntN(12) {
					payload := make([]byte, rng.IntN(40))
					for i := range payload {
						payload[i] = byte(rng.Uint32())
					}
					if err := rc.fr.WriteRawFrame(http2.FrameType(rng.IntN(11)), http2.Flags(rng.Uint32()), ids[rng.IntN(len(ids))], payload); err != nil {
						return
					}
				}
				_ = rc.fr.WriteRSTStream(h.StreamID, http2.ErrCodeInternal)
				rc.waitClosed()
			})
			cc := dialAddr(t, srv.addr, nil, h2client.WithKeepalive(0, 0))
			resp, err := cc.RoundTrip(request(t, "GET", srv.addr, "/", nil))
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			noClientGoroutinesAfter(t, cc)
		})
	}
}
