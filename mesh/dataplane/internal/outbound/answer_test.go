package outbound

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

func TestOutboundAnswerMapsEachCauseToOneStatusGRPCStatusClassAndMessage(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	reset := errors.New("read: connection reset by peer")
	badChunk := &h1.Error{Status: http.StatusBadRequest, Reason: "bad chunk size"}
	for _, tc := range []struct {
		name string
		err  error
		want httpcore.Answer
	}{
		{"CONNECT inside HTTP", errConnectInHTTP, httpcore.Answer{Status: 405, GRPC: httpcore.GRPCUnimplemented, Class: "connect-refused", Msg: "CONNECT is served only by the explicit CONNECT listener"}},
		{"no route", errNoRoute, httpcore.Answer{Status: 404, GRPC: httpcore.GRPCUnimplemented, Class: "no-route", Msg: "no route matches the request"}},
		{"HTTP fault", &faultError{&route.Fault{Status: 502, Message: "chaos"}}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "fault-injected", Msg: "chaos"}},
		{"HTTP fault without status", &faultError{&route.Fault{Message: "chaos"}}, httpcore.Answer{Status: 500, GRPC: httpcore.GRPCUnavailable, Class: "fault-injected", Msg: "chaos"}},
		{"gRPC fault", &faultError{&route.Fault{GRPC: true, GRPCCode: 8, Message: "slow down"}}, httpcore.Answer{Status: 500, GRPC: 8, Class: "fault-injected", Msg: "slow down"}},
		{"no backends", errNoBackends, httpcore.Answer{Status: 500, GRPC: httpcore.GRPCUnavailable, Class: "no-backends", Msg: "the route has no backends"}},
		{"resolution failed", &resolveError{errors.New("discovery is down")}, httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "resolve", Msg: "discovery is down"}},
		{"no endpoints", &noEndpointError{backend: "web:80"}, httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "no-endpoints", Msg: "web:80 has no endpoints"}},
		{"every endpoint failing (fail fast)", &noEndpointError{backend: "web:80", failing: true}, httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "unavailable", Msg: "every endpoint of web:80 is failing"}},
		{"client gone", httpcore.ErrClientGone, httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away"}},
		{"malformed body", &httpcore.RequestBodyError{Err: badChunk}, httpcore.Answer{Status: 400, GRPC: httpcore.GRPCInternal, Class: httpcore.ClassRequestBody, Msg: "the request body is malformed: " + badChunk.Error()}},
		{"client gone mid-body", &httpcore.RequestBodyError{Err: reset}, httpcore.Answer{Status: 499, GRPC: httpcore.GRPCUnavailable, Class: "client-gone", Msg: "the client went away in the middle of the request body"}},
		{"idle", &timeoutError{after: 2 * time.Second, idle: true}, httpcore.Answer{Status: 504, GRPC: httpcore.GRPCDeadlineExceeded, Class: "idle-timeout", Msg: "nothing moved within 2s"}},
		{"request deadline (or the budget's backoff outlasting it)", errRequestTimeout, httpcore.Answer{Status: 504, GRPC: httpcore.GRPCDeadlineExceeded, Class: "request-timeout", Msg: "the request timed out"}},
		{"response head", &timeoutError{after: 50 * time.Millisecond}, httpcore.Answer{Status: 504, GRPC: httpcore.GRPCDeadlineExceeded, Class: "response-timeout", Msg: "no response within 50ms"}},
		{"dial failure", &httpcore.DialError{Err: refused}, httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: refused.Error()}},
		{"wrapped dial failure", fmt.Errorf("pool: %w", &httpcore.DialError{Err: refused}), httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: "pool: " + refused.Error()}},
		{"no pooled connection within the wait (the client's share)", &PoolTimeoutError{&h1.PoolTimeoutError{Addr: "10.0.0.1:4143", Wait: 3 * time.Second, Limit: 64, Share: true}},
			httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "pool-timeout", Msg: "this client holds its 64 connections to 10.0.0.1:4143 and none came back within 3s"}},
		{"no pooled connection within the wait (the pool)", &PoolTimeoutError{&h1.PoolTimeoutError{Addr: "10.0.0.1:4143", Wait: 3 * time.Second, Limit: 128}},
			httpcore.Answer{Status: 503, GRPC: httpcore.GRPCUnavailable, Class: "pool-timeout", Msg: "all 128 connections to 10.0.0.1:4143 are busy and none came back within 3s"}},
		{"upstream reset", reset, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "upstream", Msg: reset.Error()}},
		{"upgrade with a body", httpcore.ErrUpgradeBody, httpcore.Answer{Status: 400, GRPC: httpcore.GRPCUnavailable, Class: "upgrade-with-body", Msg: "an upgrade request may not have a body"}},
		{"upgrade dial failure", &httpcore.UpgradeError{Err: refused, Dial: true}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: refused.Error()}},
		{"upgrade dial failure of the pool's kind", &httpcore.UpgradeError{Err: &httpcore.DialError{Err: refused}, Dial: true}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "connect", Msg: refused.Error()}},
		{"upgrade exchange failure", &httpcore.UpgradeError{Err: reset}, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "upstream", Msg: reset.Error()}},
		{"upgrade to another protocol", httpcore.ErrBadUpgrade, httpcore.Answer{Status: 502, GRPC: httpcore.GRPCUnavailable, Class: "bad-upgrade", Msg: "the upstream switched to a protocol that was not asked for"}},
		{"connection cannot be taken over", httpcore.ErrNoHijack, httpcore.Answer{Status: 500, GRPC: httpcore.GRPCUnavailable, Class: "upgrade", Msg: "the connection cannot switch protocols"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, outboundAnswer(tc.err))
		})
	}
}

func TestOnlyAnswersThatBlameTheEndpointCountAgainstItOrAreRetried(t *testing.T) {
	for _, class := range []string{"client-gone", "request-timeout", "idle-timeout", httpcore.ClassRequestBody, classPoolTimeout} {
		assert.False(t, endpointFault(class), class)
	}
	for _, class := range []string{"connect", "upstream", "response-timeout"} {
		assert.True(t, endpointFault(class), class)
	}
}
