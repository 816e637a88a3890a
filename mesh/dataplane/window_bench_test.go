package dataplane_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// streamWindows are the response stream windows the benchmarks below
// compare, set on both proxies of the pair: fixed at the stream window
// (1 MiB, where streams started before they grew), fixed at 256 KiB, and
// the default, which starts at 256 KiB and grows to 1 MiB as the
// response is read.
var streamWindows = []struct {
	name string
	set  func(*dataplane.Config)
}{
	{"window=fixed-1MiB", func(c *dataplane.Config) { c.H2InitialStreamWindow = c.H2StreamWindow }},
	{"window=fixed-256KiB", func(c *dataplane.Config) { c.H2StreamWindow, c.H2InitialStreamWindow = 256<<10, 256<<10 }},
	{"window=growing", func(*dataplane.Config) {}},
}

// BenchmarkAbandonedDownloadByStreamWindow: what one abandoned h2c
// download pulls through the pair (BenchmarkAbandonedDownload's client,
// which opens its windows wide and never reads) with each stream window.
func BenchmarkAbandonedDownloadByStreamWindow(b *testing.B) {
	for _, w := range streamWindows {
		b.Run(w.name, func(b *testing.B) {
			abandonDownloads(b, "h2c", httpPairOptions{cfgA: w.set, cfgB: w.set})
		})
	}
}

// BenchmarkDownloadByStreamWindow is the other side: h2c downloads the
// client reads in full, one at a time, through the pair, with each
// stream window (MB/s).
func BenchmarkDownloadByStreamWindow(b *testing.B) {
	for _, size := range []int{1 << 20, 8 << 20, 64 << 20} {
		for _, w := range streamWindows {
			b.Run(fmt.Sprintf("%dMiB/%s", size>>20, w.name), func(b *testing.B) {
				hp := startHTTPPair(b, httpPairOptions{cfgA: w.set, cfgB: w.set})
				c := h2cClient()
				b.SetBytes(int64(size))
				for i := 0; i < b.N; i++ {
					resp, err := c.Get(hp.url(fmt.Sprintf("/big?n=%d", size)))
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || n != int64(size) {
						b.Fatalf("read %d of %d bytes: %v", n, size, err)
					}
				}
			})
		}
	}
}
