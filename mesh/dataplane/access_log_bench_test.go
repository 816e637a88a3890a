package dataplane_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/weftmesh/weft/mesh/dataplane"
)

// BenchmarkAccessLog measures what the access log costs per request: the
// same proxy pair and application with the log off, in Linkerd's apache
// format and in its json format (lines go to io.Discard, so the cost is
// the proxy's own work, not a terminal's). One request at a time on a
// kept-alive HTTP/1.1 connection.
//
//	go test -run XXX -bench AccessLog -benchtime 3s ./mesh/dataplane
func BenchmarkAccessLog(b *testing.B) {
	for _, format := range []string{"off", dataplane.AccessLogApache, dataplane.AccessLogJSON} {
		b.Run(format, func(b *testing.B) {
			app := startHTTPApp(b)
			app.handler = func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				io.WriteString(w, "hello from the application\n")
			}
			o := httpPairOptions{app: app, serverPolicy: allowAll(b)}
			if format != "off" {
				o.cfgB = func(c *dataplane.Config) { c.AccessLog = format }
				o.optsB = []dataplane.Option{dataplane.WithAccessLog(io.Discard)}
			}
			hp := startHTTPPair(b, o)
			benchGet(b, h1Client(), hp.url("/"), 1)
		})
	}
}
