package h2server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestStreamsResetInTheWriteThatOpenedThemNeverReachTheHandler: a
// client that opens streams and ends them in the same write (its own
// RST_STREAM, as in Rapid Reset, or a WINDOW_UPDATE of 0 the server must
// answer with RST_STREAM, as in MadeYouReset) costs the server the
// parsing, not a request to the handler. The frames go over net.Pipe,
// so each write below arrives in one read of the server (they are
// smaller than its 4 KiB buffer) and what "the same write" means does
// not depend on the machine's timing.
func TestStreamsResetInTheWriteThatOpenedThemNeverReachTheHandler(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(fr *http2.Framer, id uint32) error
	}{
		{"client RST_STREAM", func(fr *http2.Framer, id uint32) error { return fr.WriteRSTStream(id, http2.ErrCodeCancel) }},
		{"WINDOW_UPDATE of 0", func(fr *http2.Framer, id uint32) error { return fr.WriteWindowUpdate(id, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const reset = 20
			var started atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				started.Add(1)
				_, _ = io.WriteString(w, "ok")
			})
			srv, cli := net.Pipe()
			t.Cleanup(func() { cli.Close() })
			served := make(chan *conn, 1)
			go serveConn(context.Background(), srv, h, &Config{MaxConcurrentStreams: 100, MaxHeaderBytes: 64 << 10},
				func(c *conn) { served <- c })

			// The client reads everything, looking for the response
			// to its last stream.
			answered := make(chan uint32, 1)
			go func() {
				fr := http2.NewFramer(io.Discard, cli)
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
						answered <- d.StreamID
					}
				}
			}()

			var hdr bytes.Buffer
			enc := hpack.NewEncoder(&hdr)
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "x"}, {":path", "/"}} {
				require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
			}
			var buf bytes.Buffer
			fr := http2.NewFramer(&buf, nil)
			fr.AllowIllegalWrites = true
			send := func() {
				t.Helper()
				_ = cli.SetWriteDeadline(time.Now().Add(30 * time.Second)) // hang guard only
				_, err := cli.Write(buf.Bytes())
				require.NoError(t, err)
				buf.Reset()
			}
			buf.WriteString(clientPreface)
			require.NoError(t, fr.WriteSettings())
			send()

			// One write: reset streams opened and ended.
			id := uint32(1)
			for range reset {
				require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndStream: true, EndHeaders: true}))
				require.NoError(t, tc.end(fr, id))
				id += 2
			}
			require.Less(t, buf.Len(), 4096, "the batch must fit one read of the server")
			send()
			// The next write: a request the server answers.
			require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr.Bytes(), EndStream: true, EndHeaders: true}))
			send()
			select {
			case got := <-answered:
				assert.Equal(t, id, got)
			case <-time.After(30 * time.Second): // hang guard only
				t.Fatal("the last request got no answer")
			}
			cli.Close()
			var c *conn
			select {
			case c = <-served:
			case <-time.After(30 * time.Second): // hang guard only
				t.Fatal("the server never ended the connection")
			}
			assert.EqualValues(t, 1, started.Load(), "only the request not reset reached the handler")
			assert.Equal(t, reset, c.notRun)
			assert.Zero(t, c.running)
		})
	}
}
