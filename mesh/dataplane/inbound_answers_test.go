package dataplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/internal/testutil"
)

func TestInboundAnswersToFailuresNameTheirCauseInStatusHeaderAndGRPCStatus(t *testing.T) {
	// Pinned as they were before the inbound path became steps with one
	// answer function (inboundAnswer); denials and rate limits have tests
	// of their own (http_authz_test.go, ratelimit_inbound_test.go).
	r, addr := inboundWith(t, closedPort(t), nil)

	t.Run("CONNECT is refused before policy", func(t *testing.T) {
		assert.Equal(t, textAnswer(405, "connect-refused", "CONNECT is not forwarded to the application"),
			rawAnswer(t, addr, "CONNECT app.example:443 HTTP/1.1\r\nHost: app.example:443\r\n\r\n"))
		assert.Equal(t, 1.0, r.metric(t, "http_errors_total", `direction="inbound"`, `reason="connect-refused"`))
		assert.Equal(t, -1.0, r.metric(t, "request_total", `direction="inbound"`), "not an inbound request")
	})

	t.Run("an application that is not listening", func(t *testing.T) {
		assert.Equal(t, textAnswer(502, "app-unreachable", "the application is not reachable"), h1Answer(t, "http://"+addr+"/"))
		assert.Equal(t, grpcAnswer(14, "app-unreachable", "the application is not reachable"), grpcCall(t, "http://"+addr+"/shop.Cart/Get"))
		assert.Equal(t, 2.0, r.metric(t, "http_errors_total", `direction="inbound"`, `reason="app-unreachable"`))
		// The response is recorded after the answer is written.
		testutil.Eventually(t, 5*time.Second, func() bool {
			return r.metric(t, "response_total", `direction="inbound"`, `error="app-unreachable"`, `classification="failure"`) == 2
		}, "both requests are counted as failed inbound responses")
		assert.Equal(t, 1.0, r.metric(t, "response_total", `direction="inbound"`, `error="app-unreachable"`, `grpc_status="14"`))
	})
}
