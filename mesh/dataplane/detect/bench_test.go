package detect_test

import (
	"testing"

	"github.com/weftmesh/weft/mesh/dataplane/detect"
)

// BenchmarkClassify classifies the first bytes of the usual connections:
// an HTTP/1 request line, the HTTP/2 preface, a TLS record, a binary
// protocol and a text one.
func BenchmarkClassify(b *testing.B) {
	inputs := map[string][]byte{
		"http1":  []byte("GET /api/v1/items?page=2 HTTP/1.1\r\nHost: web.shop.svc.cluster.local\r\n\r\n"),
		"h2":     []byte(detect.H2Preface),
		"tls":    []byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"),
		"binary": []byte("\x00\x00\x00\x08\x04\xd2\x16\x2f"),
		"text":   []byte("HELLO world from a text protocol\r\n"),
	}
	for _, name := range []string{"http1", "h2", "tls", "binary", "text"} {
		in := inputs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if detect.Classify(in) == detect.Unknown {
					b.Fatal("undecided")
				}
			}
		})
	}
}
