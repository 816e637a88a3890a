package inbound

import (
	"errors"
	"net/http"

	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Why the inbound path answers a request itself. The steps of a request
// for the local application (authorizing, preparing its header, sending,
// upgrading) return these causes, or the cause of a protocol upgrade
// (httpcore.ForwardUpgrade is shared); inboundAnswer is the one
// place that turns a cause into what the client gets.
var errConnectToApp = errors.New("dataplane: CONNECT is not forwarded to the application")

// denyError is a request the port's policy refuses: the evaluator's
// reason, and for a refusal of the whole client (no policy, a server
// that does not listen on the address used) what the client should read.
type denyError struct {
	reason authz.Reason
	detail string
}

func (e *denyError) Error() string { return "dataplane: denied: " + e.reason.String() }

// rateLimitError is a request the port's local rate limit refuses, with
// the limiter's message (Linkerd's, e.g. "total rate limit exceeded:
// 100rps").
type rateLimitError struct{ reason string }

func (e *rateLimitError) Error() string { return "dataplane: rate-limited: " + e.reason }

// headerError is a request header that an HTTP/1 application cannot be
// sent (a request that arrived over HTTP/2).
type headerError struct{ name string }

func (e *headerError) Error() string {
	return "dataplane: header " + e.name + " cannot be sent over HTTP/1"
}

// appError is the exchange with the application failing: it could not
// be reached (dial), or it failed after the request was sent.
type appError struct {
	err  error
	dial bool
}

func (e *appError) Error() string { return "dataplane: application: " + e.err.Error() }
func (e *appError) Unwrap() error { return e.err }

// inboundAnswer maps why a request for the local application got no
// answer from it to the answer the proxy makes instead: the HTTP status,
// the gRPC status for a gRPC call, and the class that names the cause in
// l5d-proxy-error, in weft-deny-reason for a denial and in the metrics'
// labels, with a message for the client.
//
// A denial is 403 for a client no authorization admits (and for a port
// without policy), 404 for a request no route matches, 400 for a path or
// request the evaluator refuses as ambiguous; a gRPC call always gets
// PERMISSION_DENIED. A rate-limited request is 429 or RESOURCE_EXHAUSTED
// with the limiter's message. An application that cannot be reached is
// 502 (there is no other endpoint to try); a protocol upgrade's own
// failures are answered as on the outbound side.
func inboundAnswer(err error) httpcore.Answer {
	var (
		deny    *denyError
		limited *rateLimitError
		hdr     *headerError
		body    *httpcore.RequestBodyError
		app     *appError
	)
	switch {
	case errors.Is(err, errConnectToApp):
		return httpcore.Answer{Status: http.StatusMethodNotAllowed, GRPC: httpcore.GRPCUnimplemented, Class: "connect-refused", Msg: "CONNECT is not forwarded to the application"}
	case errors.As(err, &deny) && deny.reason == authz.ReasonNoRoute:
		return httpcore.Answer{Status: http.StatusNotFound, GRPC: httpcore.GRPCPermissionDenied, Class: deny.reason.String(), Msg: "no route of the server matches the request"}
	case deny != nil && deny.reason == authz.ReasonInvalidPath:
		return httpcore.Answer{Status: http.StatusBadRequest, GRPC: httpcore.GRPCPermissionDenied, Class: deny.reason.String(), Msg: "the request path is ambiguous or malformed"}
	case deny != nil && deny.reason == authz.ReasonAmbiguousRequest:
		return httpcore.Answer{Status: http.StatusBadRequest, GRPC: httpcore.GRPCPermissionDenied, Class: deny.reason.String(), Msg: "a header or query parameter a route matches on has conflicting values"}
	case deny != nil && deny.detail != "":
		return httpcore.Answer{Status: http.StatusForbidden, GRPC: httpcore.GRPCPermissionDenied, Class: deny.reason.String(), Msg: deny.detail}
	case deny != nil:
		return httpcore.Answer{Status: http.StatusForbidden, GRPC: httpcore.GRPCPermissionDenied, Class: deny.reason.String(), Msg: "no authorization admits the client"}
	case errors.As(err, &limited):
		return httpcore.Answer{Status: http.StatusTooManyRequests, GRPC: httpcore.GRPCResourceExhausted, Class: "rate-limited", Msg: limited.reason}
	case errors.As(err, &hdr):
		return httpcore.Answer{Status: http.StatusBadRequest, GRPC: httpcore.GRPCInvalidArgument, Class: "invalid-header", Msg: "header " + hdr.name + " cannot be sent over HTTP/1"}
	// Before the client's causes: whatever the application's exchange
	// wraps is its own failure.
	case errors.As(err, &app) && app.dial:
		return httpcore.Answer{Status: http.StatusBadGateway, GRPC: httpcore.GRPCUnavailable, Class: "app-unreachable", Msg: "the application is not reachable"}
	case app != nil:
		return httpcore.Answer{Status: http.StatusBadGateway, GRPC: httpcore.GRPCUnavailable, Class: "app", Msg: app.err.Error()}
	case errors.Is(err, httpcore.ErrClientGone):
		return httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away"}
	case errors.As(err, &body):
		return *httpcore.BodyFailure(body.Err)
	}
	if a, ok := httpcore.UpgradeAnswer(err); ok {
		// ForwardUpgrade's causes: the same answers both ways (a dial
		// failure of the upgrade's own connection is "connect", 502).
		return a
	}
	return httpcore.Answer{Status: http.StatusBadGateway, GRPC: httpcore.GRPCUnavailable, Class: "app", Msg: err.Error()}
}
