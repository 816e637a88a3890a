package outbound

import (
	"net/http"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
)

// tapOutbound offers an outbound request to the open taps. ep is the
// endpoint it is sent to (zero when the proxy answers it itself).
func (h *HTTP) tapOutbound(r *http.Request, conn *httpcore.Conn, route string, ep endpoint.Endpoint) *tap.Request {
	v := tap.View{
		Direction: ptap.TapEvent_OUTBOUND, Src: conn.Remote, Dst: ep.Addr, R: r,
		Scheme: "http", Method: r.Method, Authority: r.Host, Path: httpcore.EscapedPath(r), Route: route,
		DstIdentity: ep.Identity, DstLabels: ep.MetricLabels,
	}
	return h.Tap.Start(&v)
}
