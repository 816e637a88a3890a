package outbound

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// Why the outbound path answers a request itself. The steps of a request
// (routing, picking, sending, upgrading) return these causes, or the
// error of the exchange itself; outboundAnswer is the one place that
// turns a cause into what the client gets.
var (
	errConnectInHTTP  = errors.New("dataplane: CONNECT is served only by the explicit CONNECT listener")
	errNoRoute        = errors.New("dataplane: no route matches the request")
	errNoBackends     = errors.New("dataplane: the route has no backends")
	errRequestTimeout = errors.New("dataplane: the request timed out")
)

// faultError is a failure a route or backend injects.
type faultError struct{ fault *route.Fault }

func (e *faultError) Error() string { return "dataplane: injected fault: " + e.fault.Message }

// resolveError is a backend whose discovery could not be started.
type resolveError struct{ err error }

func (e *resolveError) Error() string { return "dataplane: resolving a backend: " + e.err.Error() }
func (e *resolveError) Unwrap() error { return e.err }

// noEndpointError is a backend without an endpoint to send to: it has
// none, or every one it has is failing (ejected by failure accrual).
type noEndpointError struct {
	backend string
	failing bool
}

func (e *noEndpointError) Error() string {
	if e.failing {
		return "dataplane: every endpoint of " + e.backend + " is failing"
	}
	return "dataplane: " + e.backend + " has no endpoints"
}

// timeoutError is a wait that ran out: for the response head (idle is
// false) or for any byte to move either way (idle).
type timeoutError struct {
	after time.Duration
	idle  bool
}

func (e *timeoutError) Error() string { return "dataplane: timed out after " + e.after.String() }

// classPoolTimeout names a request that waited for a pooled HTTP/1.1
// connection past dataplane.Config.HTTPPoolWaitTimeout.
const classPoolTimeout = "pool-timeout"

// PoolTimeoutError is a request that found no pooled connection free
// within the pool's wait deadline: the HTTP/1.1 pool to peer proxies
// returns it from HTTP.RoundTrip, and the request is answered 503
// "pool-timeout" without trying another endpoint.
type PoolTimeoutError struct{ Err *h1.PoolTimeoutError }

func (e *PoolTimeoutError) Error() string { return "dataplane: " + e.Err.Error() }
func (e *PoolTimeoutError) Unwrap() error { return e.Err }

// message is the answer's text (l5d-proxy-error, the body).
func (e *PoolTimeoutError) message() string {
	if e.Err.Share {
		return "this client holds its " + strconv.Itoa(e.Err.Limit) + " connections to " + e.Err.Addr + " and none came back within " + e.Err.Wait.String()
	}
	return "all " + strconv.Itoa(e.Err.Limit) + " connections to " + e.Err.Addr + " are busy and none came back within " + e.Err.Wait.String()
}

// outboundAnswer maps why a request got no answer from upstream to the
// answer the proxy makes instead: the HTTP status, the gRPC status for a
// gRPC call, and the class that names the cause in l5d-proxy-error and in
// the metrics' reason label, with a message for the client. A dial error
// is 503 (another endpoint may serve); any other error of the exchange is
// 502 with its text.
func outboundAnswer(err error) httpcore.Answer {
	var (
		fault *faultError
		res   *resolveError
		noEP  *noEndpointError
		to    *timeoutError
		body  *httpcore.RequestBodyError
		dial  *httpcore.DialError
		pool  *PoolTimeoutError
	)
	switch {
	case errors.Is(err, errConnectInHTTP):
		return httpcore.Answer{Status: http.StatusMethodNotAllowed, GRPC: httpcore.GRPCUnimplemented, Class: "connect-refused", Msg: "CONNECT is served only by the explicit CONNECT listener"}
	case errors.Is(err, errNoRoute):
		return httpcore.Answer{Status: http.StatusNotFound, GRPC: httpcore.GRPCUnimplemented, Class: "no-route", Msg: "no route matches the request"}
	case errors.As(err, &fault):
		return *faultErr(fault.fault)
	case errors.Is(err, errNoBackends):
		return httpcore.Answer{Status: http.StatusInternalServerError, GRPC: httpcore.GRPCUnavailable, Class: "no-backends", Msg: "the route has no backends"}
	case errors.As(err, &res):
		return httpcore.Answer{Status: http.StatusServiceUnavailable, GRPC: httpcore.GRPCUnavailable, Class: "resolve", Msg: res.err.Error()}
	case errors.As(err, &noEP) && noEP.failing:
		return httpcore.Answer{Status: http.StatusServiceUnavailable, GRPC: httpcore.GRPCUnavailable, Class: "unavailable", Msg: "every endpoint of " + noEP.backend + " is failing"}
	case noEP != nil:
		return httpcore.Answer{Status: http.StatusServiceUnavailable, GRPC: httpcore.GRPCUnavailable, Class: "no-endpoints", Msg: noEP.backend + " has no endpoints"}
	case errors.Is(err, httpcore.ErrClientGone):
		return httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away"}
	case errors.As(err, &body):
		return *httpcore.BodyFailure(body.Err)
	case errors.As(err, &to) && to.idle:
		return httpcore.Answer{Status: http.StatusGatewayTimeout, GRPC: httpcore.GRPCDeadlineExceeded, Class: "idle-timeout", Msg: "nothing moved within " + to.after.String()}
	case errors.Is(err, errRequestTimeout):
		return httpcore.Answer{Status: http.StatusGatewayTimeout, GRPC: httpcore.GRPCDeadlineExceeded, Class: "request-timeout", Msg: "the request timed out"}
	case to != nil:
		return httpcore.Answer{Status: http.StatusGatewayTimeout, GRPC: httpcore.GRPCDeadlineExceeded, Class: "response-timeout", Msg: "no response within " + to.after.String()}
	}
	if a, ok := httpcore.UpgradeAnswer(err); ok {
		// httpcore.ForwardUpgrade's causes: the same answers both ways.
		return a
	}
	switch {
	case errors.As(err, &pool):
		// Not the endpoint's fault (the pool is busy, or the client holds
		// its share of it): not retried elsewhere, not counted against it.
		return httpcore.Answer{Status: http.StatusServiceUnavailable, GRPC: httpcore.GRPCUnavailable, Class: classPoolTimeout, Msg: pool.message()}
	case errors.As(err, &dial):
		return httpcore.Answer{Status: http.StatusServiceUnavailable, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: err.Error()}
	}
	return httpcore.Answer{Status: http.StatusBadGateway, GRPC: httpcore.GRPCUnavailable, Class: "upstream", Msg: err.Error()}
}

// endpointFault reports whether an answer blames the endpoint (it counts
// against it and may be retried elsewhere) rather than the client or the
// request's own deadline.
func endpointFault(class string) bool {
	switch class {
	case "client-gone", "request-timeout", "idle-timeout", httpcore.ClassRequestBody, classPoolTimeout:
		return false
	}
	return true
}
