package dataplane

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestInboundAnswerMapsEachCauseToOneStatusGRPCStatusClassAndMessage(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:8080: connect: connection refused")
	reset := errors.New("read: connection reset by peer")
	badChunk := &h1.Error{Status: http.StatusBadRequest, Reason: "bad chunk size"}
	for _, tc := range []struct {
		name string
		err  error
		want proxyErr
	}{
		{"CONNECT", errConnectToApp, proxyErr{405, grpcUnimplemented, "connect-refused", "CONNECT is not forwarded to the application"}},
		{"no authorization admits the client", &denyError{reason: authz.ReasonUnauthorized},
			proxyErr{403, grpcPermissionDenied, "unauthorized", "no authorization admits the client"}},
		{"no policy for the port", &denyError{authz.ReasonNoPolicy, "policy: port 8080 has no server"},
			proxyErr{403, grpcPermissionDenied, "no-policy", "policy: port 8080 has no server"}},
		{"a server that does not listen on the address used", &denyError{authz.ReasonUnauthorized, "the server does not listen on the address the client used"},
			proxyErr{403, grpcPermissionDenied, "unauthorized", "the server does not listen on the address the client used"}},
		{"no route (a detail is not the client's business)", &denyError{authz.ReasonNoRoute, "ignored"},
			proxyErr{404, grpcPermissionDenied, "no-route", "no route of the server matches the request"}},
		{"ambiguous path", &denyError{reason: authz.ReasonInvalidPath},
			proxyErr{400, grpcPermissionDenied, "invalid-path", "the request path is ambiguous or malformed"}},
		{"conflicting header values", &denyError{reason: authz.ReasonAmbiguousRequest},
			proxyErr{400, grpcPermissionDenied, "ambiguous-request", "a header or query parameter a route matches on has conflicting values"}},
		{"rate-limited", &rateLimitError{"total rate limit exceeded: 100rps"},
			proxyErr{429, grpcResourceExhausted, "rate-limited", "total rate limit exceeded: 100rps"}},
		{"a header HTTP/1 cannot carry", &headerError{"x-bad"}, proxyErr{400, grpcInvalidArgument, "invalid-header", "header x-bad cannot be sent over HTTP/1"}},
		{"client gone", errClientGone, proxyErr{499, grpcUnavailable, "client-gone", "the client went away"}},
		{"malformed body", &requestBodyError{badChunk}, proxyErr{400, grpcInternal, classRequestBody, "the request body is malformed: " + badChunk.Error()}},
		{"client gone mid-body", &requestBodyError{reset}, proxyErr{499, grpcUnavailable, "client-gone", "the client went away in the middle of the request body"}},
		{"application unreachable", &appError{err: &dialError{refused}, dial: true}, proxyErr{502, grpcUnavailable, "app-unreachable", "the application is not reachable"}},
		{"application failing", &appError{err: reset}, proxyErr{502, grpcUnavailable, "app", reset.Error()}},
		{"application failing with an error that wraps another cause", &appError{err: fmt.Errorf("h2: %w", errClientGone)},
			proxyErr{502, grpcUnavailable, "app", "h2: " + errClientGone.Error()}},
		{"upgrade with a body", errUpgradeBody, proxyErr{400, grpcUnavailable, "upgrade-with-body", "an upgrade request may not have a body"}},
		{"upgrade dial failure", &upgradeError{err: refused, dial: true}, proxyErr{502, grpcUnavailable, "connect", refused.Error()}},
		{"upgrade exchange failure", &upgradeError{err: reset}, proxyErr{502, grpcUnavailable, "upstream", reset.Error()}},
		{"upgrade to another protocol", errBadUpgrade, proxyErr{502, grpcUnavailable, "bad-upgrade", "the upstream switched to a protocol that was not asked for"}},
		{"connection cannot be taken over", errNoHijack, proxyErr{500, grpcUnavailable, "upgrade", "the connection cannot switch protocols"}},
		{"anything else", reset, proxyErr{502, grpcUnavailable, "app", reset.Error()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, inboundAnswer(tc.err))
		})
	}
}
