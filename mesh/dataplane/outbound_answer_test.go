package dataplane

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

func TestOutboundAnswerMapsEachCauseToOneStatusGRPCStatusClassAndMessage(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	reset := errors.New("read: connection reset by peer")
	badChunk := &h1.Error{Status: http.StatusBadRequest, Reason: "bad chunk size"}
	for _, tc := range []struct {
		name string
		err  error
		want proxyErr
	}{
		{"CONNECT inside HTTP", errConnectInHTTP, proxyErr{405, grpcUnimplemented, "connect-refused", "CONNECT is served only by the explicit CONNECT listener"}},
		{"no route", errNoRoute, proxyErr{404, grpcUnimplemented, "no-route", "no route matches the request"}},
		{"HTTP fault", &faultError{&route.Fault{Status: 502, Message: "chaos"}}, proxyErr{502, grpcUnavailable, "fault-injected", "chaos"}},
		{"HTTP fault without status", &faultError{&route.Fault{Message: "chaos"}}, proxyErr{500, grpcUnavailable, "fault-injected", "chaos"}},
		{"gRPC fault", &faultError{&route.Fault{GRPC: true, GRPCCode: 8, Message: "slow down"}}, proxyErr{500, 8, "fault-injected", "slow down"}},
		{"no backends", errNoBackends, proxyErr{500, grpcUnavailable, "no-backends", "the route has no backends"}},
		{"resolution failed", &resolveError{errors.New("discovery is down")}, proxyErr{503, grpcUnavailable, "resolve", "discovery is down"}},
		{"no endpoints", &noEndpointError{backend: "web:80"}, proxyErr{503, grpcUnavailable, "no-endpoints", "web:80 has no endpoints"}},
		{"every endpoint failing (fail fast)", &noEndpointError{backend: "web:80", failing: true}, proxyErr{503, grpcUnavailable, "unavailable", "every endpoint of web:80 is failing"}},
		{"client gone", errClientGone, proxyErr{499, grpcUnavailable, "client-gone", "the client went away"}},
		{"malformed body", &requestBodyError{badChunk}, proxyErr{400, grpcInternal, classRequestBody, "the request body is malformed: " + badChunk.Error()}},
		{"client gone mid-body", &requestBodyError{reset}, proxyErr{499, grpcUnavailable, "client-gone", "the client went away in the middle of the request body"}},
		{"idle", &timeoutError{after: 2 * time.Second, idle: true}, proxyErr{504, grpcDeadlineExceeded, "idle-timeout", "nothing moved within 2s"}},
		{"request deadline (or the budget's backoff outlasting it)", errRequestTimeout, proxyErr{504, grpcDeadlineExceeded, "request-timeout", "the request timed out"}},
		{"response head", &timeoutError{after: 50 * time.Millisecond}, proxyErr{504, grpcDeadlineExceeded, "response-timeout", "no response within 50ms"}},
		{"dial failure", &dialError{refused}, proxyErr{503, grpcUnavailable, "connect", refused.Error()}},
		{"wrapped dial failure", fmt.Errorf("pool: %w", &dialError{refused}), proxyErr{503, grpcUnavailable, "connect", "pool: " + refused.Error()}},
		{"no pooled connection within the wait (the client's share)", &poolTimeoutError{&h1.PoolTimeoutError{Addr: "10.0.0.1:4143", Wait: 3 * time.Second, Limit: 64, Share: true}},
			proxyErr{503, grpcUnavailable, "pool-timeout", "this client holds its 64 connections to 10.0.0.1:4143 and none came back within 3s"}},
		{"no pooled connection within the wait (the pool)", &poolTimeoutError{&h1.PoolTimeoutError{Addr: "10.0.0.1:4143", Wait: 3 * time.Second, Limit: 128}},
			proxyErr{503, grpcUnavailable, "pool-timeout", "all 128 connections to 10.0.0.1:4143 are busy and none came back within 3s"}},
		{"upstream reset", reset, proxyErr{502, grpcUnavailable, "upstream", reset.Error()}},
		{"upgrade with a body", errUpgradeBody, proxyErr{400, grpcUnavailable, "upgrade-with-body", "an upgrade request may not have a body"}},
		{"upgrade dial failure", &upgradeError{err: refused, dial: true}, proxyErr{502, grpcUnavailable, "connect", refused.Error()}},
		{"upgrade dial failure of the pool's kind", &upgradeError{err: &dialError{refused}, dial: true}, proxyErr{502, grpcUnavailable, "connect", refused.Error()}},
		{"upgrade exchange failure", &upgradeError{err: reset}, proxyErr{502, grpcUnavailable, "upstream", reset.Error()}},
		{"upgrade to another protocol", errBadUpgrade, proxyErr{502, grpcUnavailable, "bad-upgrade", "the upstream switched to a protocol that was not asked for"}},
		{"connection cannot be taken over", errNoHijack, proxyErr{500, grpcUnavailable, "upgrade", "the connection cannot switch protocols"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, outboundAnswer(tc.err))
		})
	}
}

func TestOnlyAnswersThatBlameTheEndpointCountAgainstItOrAreRetried(t *testing.T) {
	for _, class := range []string{"client-gone", "request-timeout", "idle-timeout", classRequestBody, classPoolTimeout} {
		assert.False(t, endpointFault(class), class)
	}
	for _, class := range []string{"connect", "upstream", "response-timeout"} {
		assert.True(t, endpointFault(class), class)
	}
}
