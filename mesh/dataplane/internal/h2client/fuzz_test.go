package h2client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// Limits the fuzzed client runs with: small, so that the fuzzer's bytes
// can reach them.
const (
	fuzzWindow      = 65535
	fuzzHeaderBytes = 4096
	fuzzPostBody    = 100 << 10 // more than the server's initial window
)

// FuzzClient feeds a client hostile server frames: the fuzzer's bytes are
// what the server sends, after its SETTINGS, once it has read the
// HEADERS of two requests (a GET on one stream, a POST whose 100 KiB body
// outgrows the initial send window on the other); then the server closes
// the connection. The client must not panic; every request and body read
// must end (the close ends them all, so a request still waiting after a
// generous bound is a hang); a body's buffer never holds more than the
// stream window unread, nor grows past twice it; and no goroutine of the client is left once the
// connection is closed.
func FuzzClient(f *testing.F) {
	for _, seed := range clientSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		if len(frames) > 1<<20 {
			return
		}
		runHostileServer(t, frames, false)
	})
}

// FuzzClientFields is FuzzClient with the requests sent by
// RoundTripFields: the same hostile server frames, the same bounds.
func FuzzClientFields(f *testing.F) {
	for _, seed := range clientSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, frames []byte) {
		if len(frames) > 1<<20 {
			return
		}
		runHostileServer(t, frames, true)
	})
}

// runHostileServer sends a GET and a POST to a server that answers with
// frames, by RoundTrip or, with fields set, by RoundTripFields.
func runHostileServer(t *testing.T, frames []byte, fields bool) {
	cconn, sconn := net.Pipe()
	gotRequests := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // reads what the client sends, until the close
		defer wg.Done()
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(sconn, pre); err != nil {
			return
		}
		fr := http2.NewFramer(nil, sconn)
		seen := 0
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				if seen++; seen == 2 {
					close(gotRequests)
				}
			}
		}
	}()
	go func() { // writes SETTINGS, then the fuzzer's frames, then closes
		defer wg.Done()
		defer sconn.Close()
		var sb bytes.Buffer
		_ = http2.NewFramer(&sb, nil).WriteSettings()
		if _, err := sconn.Write(sb.Bytes()); err != nil {
			return
		}
		select {
		case <-gotRequests:
		case <-time.After(10 * time.Second):
			t.Error("the client did not send its two requests")
			return
		}
		_, _ = sconn.Write(frames)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := h2client.New(ctx, cconn, h2client.WithWindows(fuzzWindow, fuzzWindow),
		h2client.WithMaxHeaderBytes(fuzzHeaderBytes), h2client.WithKeepalive(0, 0), h2client.WithIdleTimeout(0))
	if err != nil {
		sconn.Close()
		wg.Wait()
		return
	}
	reqs := []*http.Request{
		fuzzRequest(ctx, http.MethodGet, nil),
		fuzzRequest(ctx, http.MethodPost, bytes.Repeat([]byte("p"), fuzzPostBody)),
	}
	done := make(chan struct{}, len(reqs))
	for _, req := range reqs {
		go func() {
			defer func() { done <- struct{}{} }()
			var body io.ReadCloser
			if fields {
				fr := &h2client.FieldRequest{Method: req.Method, Scheme: "http", Authority: "fuzz.test", Path: "/x",
					Fields: []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}}, Body: req.Body}
				resp, err := cc.RoundTripFields(ctx, fr)
				if err != nil {
					return
				}
				defer resp.Trailers() // after the body's end, as a relay asks
				body = resp.Body
			} else {
				resp, err := cc.RoundTrip(req)
				if err != nil {
					return
				}
				body = resp.Body
			}
			defer body.Close()
			if body == http.NoBody {
				return
			}
			buf := make([]byte, 4096)
			for {
				unread, capacity := h2client.BodyBuffer(body)
				if unread > fuzzWindow || capacity > 2*fuzzWindow {
					t.Errorf("a body buffer holds %d unread bytes in %d, over the stream window of %d (or twice it)", unread, capacity, fuzzWindow)
				}
				if _, err := body.Read(buf); err != nil {
					return
				}
			}
		}()
	}
	for range reqs {
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("a request did not end after the server closed the connection:\n%s", buf[:n])
		}
	}
	cc.Close()
	wg.Wait()
	waitNoClientGoroutines(t)
}

// waitNoClientGoroutines fails when a goroutine of the client is still
// there a while after its connection closed.
func waitNoClientGoroutines(t *testing.T) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		left := false
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, "internal/h2client.") && !strings.Contains(g, "_test.") {
				left = true
			}
		}
		if !left {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("client goroutines left:\n%s", buf[:n])
		}
		time.Sleep(time.Millisecond)
	}
}

func fuzzRequest(ctx context.Context, method string, body []byte) *http.Request {
	var rd io.Reader
	if body != nil {
		rd = readyBody{bytes.NewReader(body)}
	}
	req, _ := http.NewRequestWithContext(ctx, method, "http://fuzz.test/x", rd)
	return req
}

// clientSeeds are server replies to streams 1 and 3: well-formed ones and
// the protocol errors the unit tests use.
func clientSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	seed := func(write func(fr *http2.Framer, block func(kv ...string) []byte)) {
		var out, hb bytes.Buffer
		fr := http2.NewFramer(&out, nil)
		enc := hpack.NewEncoder(&hb)
		block := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i+1 < len(kv); i += 2 {
				_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return append([]byte(nil), hb.Bytes()...)
		}
		write(fr, block)
		seeds = append(seeds, out.Bytes())
	}
	big := make([]byte, 16<<10)
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // both answered
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "200", "content-length", "2"), EndHeaders: true})
		_ = fr.WriteData(1, true, []byte("ok"))
		_ = fr.WriteWindowUpdate(0, 1<<20)
		_ = fr.WriteWindowUpdate(3, 1<<20)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":status", "204"), EndStream: true, EndHeaders: true})
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // CONTINUATION, padding, trailers, reset
		b := block(":status", "200", "content-type", "application/grpc", "x-long", strings.Repeat("v", 100))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:10]})
		_ = fr.WriteContinuation(1, true, b[10:])
		_ = fr.WriteDataPadded(1, false, []byte("body"), make([]byte, 20))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block("grpc-status", "0"), EndStream: true, EndHeaders: true})
		_ = fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // settings, pings, goaway
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		_ = fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye"))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "200"), EndStream: true, EndHeaders: true})
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // 1xx, then more DATA than the window
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "103", "link", "</a>"), EndHeaders: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "200"), EndHeaders: true})
		for range 5 {
			_ = fr.WriteData(1, false, big)
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":status", "200"), EndHeaders: true})
		_ = fr.WriteData(3, false, big)
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // frames on streams never opened
		_ = fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: block(":method", "GET"), EndHeaders: true})
		_ = fr.WriteData(5, false, []byte("x"))
		_ = fr.WriteRSTStream(7, http2.ErrCodeCancel)
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // bad header blocks
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "2000", "x", "1"), EndHeaders: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0xff, 0x7f}, EndHeaders: true})
	})
	seed(func(fr *http2.Framer, block func(kv ...string) []byte) { // a header list over the cap
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(":status", "200", "x-big", strings.Repeat("h", 5000)), EndHeaders: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(":status", "200"), EndHeaders: true})
		_ = fr.WriteData(3, true, nil)
	})
	return seeds
}
