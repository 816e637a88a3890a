package inbound

import (
	"net/http"

	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Tap is offered a request only while a tap is open (h.Tap.On()), so a
// proxy without open taps pays one atomic load per request; with taps
// open and none taking the request, building and matching the view
// allocates nothing.

// tapInbound offers an inbound request to the open taps, described with
// the policy that decided on it.
func (h *HTTP) tapInbound(r *http.Request, info *Conn, st *Policy, res *authz.Result) *tap.Request {
	v := tap.View{
		Direction: ptap.TapEvent_INBOUND, Src: info.Remote, Dst: info.TargetAddr, R: r,
		Scheme: "http", Method: r.Method, Authority: r.Host, Path: httpcore.EscapedPath(r), Route: routeLabel(res),
		Peer: info.Peer, Result: res,
	}
	if st != nil {
		v.Server = st.Srv
	}
	return h.Tap.Start(&v)
}

// routeLabel names the policy route that matched, "" without one.
func routeLabel(res *authz.Result) string {
	m, ok := res.Route()
	if !ok {
		return ""
	}
	if m.Default != "" {
		return m.Default
	}
	return m.Name
}
