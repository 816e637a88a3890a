package h2server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Every test leaves no goroutine behind: connections, handlers and
// their waiting goroutines all end with ServeConn.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fuzzFrames encodes a client's frames after the preface for the seed
// corpus.
func fuzzFrames(write func(fr *http2.Framer, enc func(fields ...string) []byte)) []byte {
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	fr.AllowIllegalWrites = true
	var hb bytes.Buffer
	he := hpack.NewEncoder(&hb)
	enc := func(fields ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(fields); i += 2 {
			_ = he.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return append([]byte(nil), hb.Bytes()...)
	}
	_ = fr.WriteSettings()
	write(fr, enc)
	return out.Bytes()
}

var fuzzGet = []string{":method", "GET", ":scheme", "http", ":authority", "x", ":path", "/"}

// FuzzServeConn feeds a byte stream, after the client preface, as the
// client's side of a connection. The server must not panic, must end
// (the stream ends, then the connection within the linger), must leave
// no goroutine behind, and must keep its output queue within its bound.
func FuzzServeConn(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-T")
		_, _ = io.Copy(w, r.Body)
		w.Header().Set("X-T", "1")
	})
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzServe(t, in, &Config{IdleTimeout: time.Second, WriteTimeout: time.Second, PingInterval: -1}, echo)
	})
}

// fuzzSeeds are client frame sequences for the seed corpora.
func fuzzSeeds() [][]byte {
	return [][]byte{
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(fuzzGet...), EndStream: true, EndHeaders: true})
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) {
			post := []string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/echo", "content-length", "5"}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(post...), EndHeaders: true})
			_ = fr.WriteData(1, true, []byte("hello"))
			_ = fr.WritePing(false, [8]byte{1})
			_ = fr.WriteSettingsAck()
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // rapid reset
			for id := uint32(1); id < 400; id += 2 {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(fuzzGet...), EndStream: true, EndHeaders: true})
				_ = fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // MadeYouReset
			for id := uint32(1); id < 400; id += 2 {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(fuzzGet...), EndHeaders: true})
				_ = fr.WriteWindowUpdate(id, 0)
			}
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // CONTINUATION flood
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(fuzzGet...)})
			for i := 0; i < 100; i++ {
				_ = fr.WriteContinuation(1, false, nil)
			}
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // bad fields
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(append(fuzzGet, "x-bad", "a\x00b")...), EndStream: true, EndHeaders: true})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(append(fuzzGet, "connection", "close")...), EndStream: true, EndHeaders: true})
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // windows
			_ = fr.WriteWindowUpdate(0, 1)
			_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
			_ = fr.WriteWindowUpdate(0, 1<<31-1)
			_ = fr.WritePriority(3, http2.PriorityParam{StreamDep: 3})
		}),
		fuzzFrames(func(fr *http2.Framer, enc func(...string) []byte) { // gRPC calls, one with trailers
			grpcPost := []string{":method", "POST", ":scheme", "http", ":authority", "x", ":path", "/s/M", "content-type", "application/grpc", "te", "trailers"}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(grpcPost...), EndHeaders: true})
			_ = fr.WriteData(1, true, []byte{0, 0, 0, 0, 2, 'h', 'i'})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(grpcPost...), EndHeaders: true})
			_ = fr.WriteData(3, false, []byte{0, 0, 0, 0, 1, 'x'})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc("x-t", "1"), EndStream: true, EndHeaders: true})
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: enc(grpcPost...), EndHeaders: true})
			_ = fr.WriteRSTStream(5, http2.ErrCodeCancel)
		}),
	}
}

// fuzzServe feeds in, after the client preface, as the client's side of
// a connection served with cfg and h.
func fuzzServe(t *testing.T, in []byte, cfg *Config, h http.Handler) {
	client, server := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var st connStats
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveConn(ctx, server, h, cfg, func(c *conn) {
			st.peakBytes, st.peakFrames = c.peakBytes, c.peakFrames
		})
	}()
	// The client reads everything the server says, as a real one does.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		_, _ = io.Copy(io.Discard, client)
	}()
	_ = client.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(client, clientPreface); err == nil {
		_, _ = client.Write(in)
	}
	cancel() // the graceful shutdown: GOAWAY, streams finish
	client.Close()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard only
		t.Fatal("the server did not end the connection")
	}
	<-readDone
	if st.peakBytes > QueueBound || st.peakFrames > QueueBoundFrames {
		t.Fatalf("queued %d bytes, %d frames: over the bound", st.peakBytes, st.peakFrames)
	}
}

// FuzzServeStreams is FuzzServeConn with the Stream API taking every
// request (an echo of the body, the request's fields and trailers sent
// back), the http.Handler none: the same bounds hold on that path.
func FuzzServeStreams(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	echo := &StreamHandler{
		Accept: func([]hpack.HeaderField) bool { return true },
		Serve: func(st *Stream) {
			if st.WriteHeader(200, st.Fields(), false) != nil {
				return
			}
			buf := make([]byte, 4096)
			body := st.Body()
			for {
				n, err := body.Read(buf)
				if n > 0 && st.Write(buf[:n]) != nil {
					return
				}
				if err == io.EOF {
					_ = st.End(append(st.Trailers(), hpack.HeaderField{Name: "x-t", Value: "1"}))
					return
				}
				if err != nil {
					return // the stream was reset: Serve's return resets it
				}
				if !isReady(body) && st.Flush() != nil {
					return
				}
			}
		},
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fuzzServe(t, in, &Config{IdleTimeout: time.Second, WriteTimeout: time.Second, PingInterval: -1, Streams: echo}, http.NotFoundHandler())
	})
}
