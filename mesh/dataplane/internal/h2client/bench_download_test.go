package h2client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
)

// BenchmarkDownload50MiB reads a 50 MiB response from x/net's HTTP/2
// server over h2c loopback with the default windows, as fast as it comes:
// what a well-behaved large download through the proxy costs (MB/s).
func BenchmarkDownload50MiB(b *testing.B) {
	const size = 50 << 20
	chunk := make([]byte, 64<<10)
	addr := startH2Bench(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for left := size; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
	}))
	conn, err := net.Dial("tcp", addr)
	require.NoError(b, err)
	cc, err := h2client.New(context.Background(), conn)
	require.NoError(b, err)
	defer cc.Close()
	buf := make([]byte, 32<<10)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d bytes: %v", n, err)
		}
	}
}
