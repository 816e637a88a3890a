package dataplane_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// sendBuffers are the two outbound send buffers the benchmarks below
// compare: left to the kernel, and the default.
var sendBuffers = []struct {
	name  string
	bytes int
}{{"sndbuf=kernel", 0}, {"sndbuf=default", dataplane.DefaultConfig().OutboundSendBuffer}}

// BenchmarkAbandonedDownload measures what one abandoned download pulls
// through the pair: a client of the outbound listener asks for 64 MiB
// over HTTP/1.1 and never reads, and the application counts the bytes it
// could write before everything between them was full. Each of those
// bytes cost both proxies a read, a write and a TLS record; a client
// that does this over and over makes the victims sharing the proxies pay
// for it (issue 27, the attack bench's jam-only-outbound). It runs with
// the outbound send buffer left to the kernel and with the default
// Config.OutboundSendBuffer, side by side.
func BenchmarkAbandonedDownload(b *testing.B) {
	for _, proto := range []string{"h1", "h2c"} {
		for _, sb := range sendBuffers {
			b.Run(proto+"/"+sb.name, func(b *testing.B) {
				abandonDownloads(b, proto, httpPairOptions{cfgA: func(c *dataplane.Config) { c.OutboundSendBuffer = sb.bytes }})
			})
		}
	}
}

// abandonDownloads runs b.N abandoned downloads of /big (askAndNeverRead)
// through a pair started with o and its own application, and reports
// what the application could write for each (MiB-moved/op).
func abandonDownloads(b *testing.B, proto string, o httpPairOptions) {
	// Each download counts into the counter current when it started, so
	// that bytes a closed one still writes are not the next one's.
	var current atomic.Pointer[atomic.Int64]
	app := startHTTPApp(b)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		written := current.Load()
		chunk := make([]byte, 32<<10)
		for i := 0; i < 2048; i++ { // 64 MiB at most
			if _, err := w.Write(chunk); err != nil {
				return
			}
			written.Add(int64(len(chunk)))
		}
	}
	o.app = app
	hp := startHTTPPair(b, o)
	var moved int64
	for i := 0; i < b.N; i++ {
		written := new(atomic.Int64)
		current.Store(written)
		c, err := net.Dial("tcp", hp.clientAddr)
		if err != nil {
			b.Fatal(err)
		}
		if err := askAndNeverRead(c, proto); err != nil {
			b.Fatal(err)
		}
		// Moved is what the application wrote once it stopped making
		// progress for 300 ms.
		last, still := int64(-1), time.Now()
		for time.Since(still) < 300*time.Millisecond {
			if n := written.Load(); n != last {
				last, still = n, time.Now()
			}
			time.Sleep(10 * time.Millisecond)
		}
		moved += last
		c.Close()
	}
	b.ReportMetric(float64(moved)/float64(b.N)/(1<<20), "MiB-moved/op")
}

// askAndNeverRead sends a GET for /big on c: over HTTP/1.1, or over h2c
// with 64 MiB of stream and connection window, as the attack bench's
// client does, so that only the client's socket stops the response.
func askAndNeverRead(c net.Conn, proto string) error {
	if proto == "h1" {
		_, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: web\r\n\r\n")
		return err
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return err
	}
	fr := http2.NewFramer(c, nil)
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 64 << 20}); err != nil {
		return err
	}
	if err := fr.WriteWindowUpdate(0, 64<<20); err != nil {
		return err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "web"}, {":path", "/big"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return err
		}
	}
	return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
}

// BenchmarkDownloadBySendBuffer is the other side of the fixed send
// buffer: a 64 MiB download the client reads in full, over HTTP/1.1 and
// h2c through the pair, with the buffer left to the kernel and with the
// default, side by side (MB/s).
func BenchmarkDownloadBySendBuffer(b *testing.B) {
	for _, proto := range []string{"h1", "h2c"} {
		for _, sb := range sendBuffers {
			b.Run(proto+"/"+sb.name, func(b *testing.B) {
				hp := startHTTPPair(b, httpPairOptions{cfgA: func(c *dataplane.Config) { c.OutboundSendBuffer = sb.bytes }})
				c := h1Client()
				if proto == "h2c" {
					c = h2cClient()
				}
				const size = 64 << 20
				b.SetBytes(size)
				for i := 0; i < b.N; i++ {
					resp, err := c.Get(hp.url(fmt.Sprintf("/big?n=%d", size)))
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || n != size {
						b.Fatalf("read %d of %d bytes: %v", n, size, err)
					}
				}
			})
		}
	}
}
