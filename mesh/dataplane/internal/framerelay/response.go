package framerelay

import (
	"errors"
	"net/http"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// RelayResponse is Relay for a call on the http.Handler path: it sends
// resp to w with x.Fix applied to its header and trailer, records the
// exchange in x the way Relay does, and closes resp's body. A body the
// upstream breaks aborts the handler, so that the client's stream is
// reset (HTTP/2) or its connection closed (HTTP/1.1) rather than ended
// as if the body were whole. h2 is whether the client's connection is
// HTTP/2, for the tap event.
func RelayResponse(w http.ResponseWriter, resp *http.Response, h2 bool, x Exchange) {
	defer resp.Body.Close()
	gs := resp.Header.Get("Grpc-Status")
	failure := route.Failure(x.Classes, resp.StatusCode, gs)
	x.Stats.Head(resp.StatusCode)
	(*x.Tap).ResponseInit(resp.StatusCode, resp.Header, h2)
	trailer, n, err := httpcore.CopyResponse(w, resp, x.Fix, x.Touch)
	if tgs := trailer.Get("Grpc-Status"); tgs != "" {
		gs = tgs
		failure = route.Failure(x.Classes, resp.StatusCode, gs)
	}
	if err != nil {
		x.Stats.Done(resp.StatusCode, gs, true, httpcore.StreamErrorClass(err))
		tap.End(x.Tap, n, -1, httpcore.StreamResetCode(err), nil)
		if errors.Is(err, httpcore.ErrUpstreamBody) {
			httpcore.Abort()
		}
		return
	}
	x.Stats.Done(resp.StatusCode, gs, failure, "")
	tap.End(x.Tap, n, tap.GRPCStatus(gs), -1, trailer)
}
