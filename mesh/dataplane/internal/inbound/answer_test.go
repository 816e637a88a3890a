package inbound

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestInboundAnswerMapsEachCauseToOneStatusGRPCStatusClassAndMessage(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:8080: connect: connection refused")
	reset := errors.New("read: connection reset by peer")
	badChunk := &h1.Error{Status: http.StatusBadRequest, Reason: "bad chunk size"}
	for _, tc := range []struct {
		name string
		err  error
		want httpcore.Answer
	}{
		{"CONNECT", errConnectToApp, httpcore.Answer{Status: 405, GRPC: httpcore.GRPCUnimplemented, Class: "connect-refused", Msg: "CONNECT is not forwarded to the application"}},
		{"no authorization admits the client", &denyError{reason: authz.ReasonUnauthorized},
			httpcore.Answer{Status: 403, GRPC: httpcore.GRPCPermissionDenied, Class: "unauthorized", Msg: "no authorization admits the client"}},
		{"no policy for the port", &denyError{authz.ReasonNoPolicy, "policy: port 8080 has no server"},
			httpcore.Answer{Status: 403, GRPC: httpcore.GRPCPermissionDenied, Class: "no-policy", Msg: "policy: port 8080 has no server"}},
		{"a server that does not listen on the address used", &denyError{authz.ReasonUnauthorized, "the server does not listen on the address the client used"},
			httpcore.Answer{Status: 403, GRPC: httpcore.GRPCPermissionDenied, Class: "unauthorized", Msg: "the server does not listen on the address the client used"}},
		{"no route (a detail is not the client's business)", &denyError{authz.ReasonNoRoute, "ignored"},
			httpcore.Answer{Status: 404, GRPC: httpcore.GRPCPermissionDenied, Class: "no-route", Msg: "no route of the server matches the request"}},
		{"ambiguous path", &denyError{reason: authz.ReasonInvalidPath},
			httpcore.Answer{Status: 400, GRPC: httpcore.GRPCPermissionDenied, Class: "invalid-path", Msg: "the request path is ambiguous or malformed"}},
		{"conflicting header values", &denyError{reason: authz.ReasonAmbiguousRequest},
			httpcore.Answer{Status: 400, GRPC: httpcore.GRPCPermissionDenied, Class: "ambiguous-request", Msg: "a header or query parameter a route matches on has conflicting values"}},
		{"rate-limited", &rateLimitError{"total rate limit exceeded: 100rps"},
			httpcore.Answer{Status: 429, GRPC: httpcore.GRPCResourceExhausted, Class: "rate-limited", Msg: "total rate limit exceeded: 100rps"}},
		{"a header HTTP/1 cannot carry", &headerError{"x-bad"}, httpcore.Answer{Status: 400, GRPC: httpcore.GRPCInvalidArgument, Class: "invalid-header", Msg: "header x-bad cannot be sent over HTTP/1"}},
		{"client gone", httpcore.ErrClientGone, httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away"}},
		{"malformed body", &httpcore.RequestBodyError{Err: badChunk}, httpcore.Answer{Status: 400, GRPC: httpcore.GRPCInternal, Class: httpcore.ClassRequestBody, Msg: "the request body is malformed: " + badChunk.Error()}},
		{"client gone mid-body", &httpcore.RequestBodyError{Err: reset}, httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away in the middle of the request body"}},
		{"application unreachable", &appError{err: &httpcore.DialError{Err: refused}, dial: true}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "app-unreachable", Msg: "the application is not reachable"}},
		{"application failing", &appError{err: reset}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "app", Msg: reset.Error()}},
		{"application failing with an error that wraps another cause", &appError{err: fmt.Errorf("h2: %w", httpcore.ErrClientGone)},
			httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "app", Msg: "h2: " + httpcore.ErrClientGone.Error()}},
		{"upgrade with a body", httpcore.ErrUpgradeBody, httpcore.Answer{Status: 400, GRPC: httpcore.GRPCUnavailable, Class: "upgrade-with-body", Msg: "an upgrade request may not have a body"}},
		{"upgrade dial failure", &httpcore.UpgradeError{Err: refused, Dial: true}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: refused.Error()}},
		{"upgrade exchange failure", &httpcore.UpgradeError{Err: reset}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "upstream", Msg: reset.Error()}},
		{"upgrade to another protocol", httpcore.ErrBadUpgrade, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "bad-upgrade", Msg: "the upstream switched to a protocol that was not asked for"}},
		{"connection cannot be taken over", httpcore.ErrNoHijack, httpcore.Answer{Status: 500, GRPC: httpcore.GRPCUnavailable, Class: "upgrade", Msg: "the connection cannot switch protocols"}},
		{"anything else", reset, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "app", Msg: reset.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, inboundAnswer(tc.err))
		})
	}
}
