package framerelay

import (
	"errors"
	"net/http"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// Exchange is what the end of one relayed call records to, and the
// direction's rules for what reaches the client.
type Exchange struct {
	Classes []route.ResponseClass // the route's response classes
	Stats   *reqmetrics.Stats
	Tap     **tap.Request // *Tap is nil unless an open tap took the call
	// Clean returns the fields to send of the response's header or
	// trailer fields (Relay, the frame path).
	Clean func([]hpack.HeaderField) []hpack.HeaderField
	// Fix edits the response's header and trailer in place into what the
	// client gets (RelayResponse, the http.Handler path).
	Fix func(http.Header)
	// Touch is called as body bytes move (an idle timeout); nil for none.
	Touch func()
}

// Relay sends resp to st and records the exchange in x; it closes
// resp's body. A response that is its head alone goes as one HEADERS
// with END_STREAM (trailers-only for gRPC); otherwise the trailers end
// the stream, and their grpc-status, when there is one, is the call's.
func Relay(st httpcore.FrameStream, resp *httpcore.FieldResponse, x Exchange) {
	defer resp.Body.Close()
	gs := httpcore.FieldValue(resp.Fields, "grpc-status")
	failure := route.Failure(x.Classes, resp.Status, gs)
	x.Stats.Head(resp.Status)
	if *x.Tap != nil {
		(*x.Tap).ResponseInit(resp.Status, httpcore.FieldHeader(resp.Fields), true)
	}
	fields := x.Clean(resp.Fields)
	only, n, err := httpcore.CopyFrames(st, resp, fields, x.Touch)
	var trailers []hpack.HeaderField
	if err == nil && !only {
		trailers = x.Clean(resp.Trailers.Trailers())
	}
	if tgs := httpcore.FieldValue(trailers, "grpc-status"); tgs != "" {
		gs = tgs
		failure = route.Failure(x.Classes, resp.Status, gs)
	}
	if err != nil {
		x.Stats.Done(resp.Status, gs, true, httpcore.StreamErrorClass(err))
		tap.End(x.Tap, n, -1, httpcore.StreamResetCode(err), nil)
		if errors.Is(err, httpcore.ErrUpstreamBody) {
			st.Reset(http2.ErrCodeInternal) // as httpcore.Abort on the http path
		}
		return
	}
	x.Stats.Done(resp.Status, gs, failure, "")
	var th http.Header
	if *x.Tap != nil && len(trailers) > 0 {
		th = httpcore.FieldHeader(trailers)
	}
	tap.End(x.Tap, n, tap.GRPCStatus(gs), -1, th)
	if only {
		_ = st.WriteHeader(resp.Status, fields, true)
	} else {
		_ = st.End(trailers)
	}
}
