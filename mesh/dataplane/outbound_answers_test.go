package dataplane_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// answer is what a client sees of an answer the proxy made itself: the
// status, the headers that carry its meaning, and the body.
type answer struct {
	Status int
	Header map[string]string
	Body   string
}

func answerOf(resp *http.Response, body string) answer {
	a := answer{Status: resp.StatusCode, Header: map[string]string{}, Body: body}
	for _, k := range []string{"L5d-Proxy-Error", "Content-Type", "Content-Length", "Grpc-Status", "Grpc-Message", "Weft-Deny-Reason"} {
		if v, ok := resp.Header[k]; ok {
			a.Header[k] = strings.Join(v, ",")
		}
	}
	return a
}

// grpcCall sends a unary gRPC-shaped request (one empty message) over h2c.
func grpcCall(t testing.TB, url string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := h2cClient().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answerOf(resp, string(b))
}

func h1Answer(t testing.TB, url string) answer {
	t.Helper()
	return answerOf(get(t, h1Client(), url))
}

// rawAnswer writes a request head on a fresh connection and reads the
// answer.
func rawAnswer(t testing.TB, addr, head string) answer {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, head)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answerOf(resp, string(b))
}

const wsHead = "GET /ws HTTP/1.1\r\nHost: web\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"

// closedPort is a loopback port nothing listens on.
func closedPort(t testing.TB) uint16 {
	ln := testutil.Listen(t)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	require.NoError(t, ln.Close())
	return port
}

// textAnswer is the proxy's plain-text answer with status and l5d-proxy-error class and message.
func textAnswer(status int, class, msg string) answer {
	body := http.StatusText(status) + ": " + msg + "\n"
	return answer{Status: status, Body: body, Header: map[string]string{
		"L5d-Proxy-Error": class + ": " + msg,
		"Content-Type":    "text/plain; charset=utf-8",
		"Content-Length":  fmt.Sprint(len(body)),
	}}
}

// grpcAnswer is the proxy's trailers-only gRPC answer.
func grpcAnswer(code int, class, msg string) answer {
	return answer{Status: http.StatusOK, Header: map[string]string{
		"L5d-Proxy-Error": class + ": " + msg,
		"Content-Type":    "application/grpc",
		"Grpc-Status":     fmt.Sprint(code),
		"Grpc-Message":    msg,
		"Content-Length":  "0",
	}}
}

func TestOutboundAnswersToFailuresNameTheirCauseInStatusHeaderAndGRPCStatus(t *testing.T) {
	// These answers are a contract with clients and dashboards: the status,
	// the l5d-proxy-error class and message, the gRPC status and the body
	// are pinned here as they were before the outbound path became steps.
	const target = "answers.shop.svc.cluster.local:80"
	rule := func(r *outbound.HttpRoute_Rule) *outbound.OutboundPolicy { return policyWith(nil, r) }
	waitFor := func(t *testing.T, o *outboundOnly, path string, status int) {
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := get(t, h1Client(), o.url(path))
			return resp.StatusCode == status
		}, "the policy reaches the proxy")
	}

	t.Run("no endpoints", func(t *testing.T) {
		o := startOutboundOnly(t, target)
		o.resolver.Set(target)
		assert.Equal(t, textAnswer(503, "no-endpoints", target+" has no endpoints"), h1Answer(t, o.url("/")))
		assert.Equal(t, grpcAnswer(14, "no-endpoints", target+" has no endpoints"), grpcCall(t, o.url("/pkg.Svc/Call")))
	})

	t.Run("endpoint refuses connections", func(t *testing.T) {
		o := startOutboundOnly(t, target)
		port := closedPort(t)
		o.resolver.Set(target, dataplane.Endpoint{Addr: netipAddrPort(port)})
		msg := fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", port)
		assert.Equal(t, textAnswer(503, "connect", msg), h1Answer(t, o.url("/")))
		assert.Equal(t, grpcAnswer(14, "connect", fmt.Sprintf("dataplane: connecting to 127.0.0.1:%d: %s", port, msg)),
			grpcCall(t, o.url("/pkg.Svc/Call")))
	})

	t.Run("no route matches", func(t *testing.T) {
		app := startHTTPApp(t)
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(app))
		o.outbound.Set(target, rule(&outbound.HttpRoute_Rule{Matches: []*httproute.HttpRouteMatch{{
			Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/only"}}}}}))
		waitFor(t, o, "/", 404)
		assert.Equal(t, textAnswer(404, "no-route", "no route matches the request"), h1Answer(t, o.url("/")))
	})

	t.Run("route injects a fault", func(t *testing.T) {
		app := startHTTPApp(t)
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(app))
		o.outbound.Set(target, rule(&outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{{
			Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{
				Status: 502, Message: "chaos monkey", Ratio: &httproute.Ratio{Numerator: 1, Denominator: 1}}}}}}))
		waitFor(t, o, "/", 502)
		assert.Equal(t, textAnswer(502, "fault-injected", "chaos monkey"), h1Answer(t, o.url("/")))
		assert.Equal(t, grpcAnswer(14, "fault-injected", "chaos monkey"), grpcCall(t, o.url("/pkg.Svc/Call")))
	})

	for _, tc := range []struct {
		name     string
		timeouts *httproute.Timeouts
		want     answer
	}{
		{"response head too late", &httproute.Timeouts{Response: durationpb.New(50 * time.Millisecond)}, textAnswer(504, "response-timeout", "no response within 50ms")},
		{"whole request too late", &httproute.Timeouts{Request: durationpb.New(50 * time.Millisecond)}, textAnswer(504, "request-timeout", "the request timed out")},
		{"nothing moves", &httproute.Timeouts{Idle: durationpb.New(50 * time.Millisecond)}, textAnswer(504, "idle-timeout", "nothing moved within 50ms")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := startHTTPApp(t)
			app.handler = func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
			o := startOutboundOnly(t, target)
			o.resolver.Set(target, endpointOf(app))
			o.outbound.Set(target, rule(&outbound.HttpRoute_Rule{Timeouts: tc.timeouts}))
			waitFor(t, o, "/", 504)
			assert.Equal(t, tc.want, h1Answer(t, o.url("/")))
		})
	}

	t.Run("upstream closes without answering", func(t *testing.T) {
		app := startHTTPApp(t)
		app.handler = func(w http.ResponseWriter, r *http.Request) {
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
		}
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(app))
		got := h1Answer(t, o.url("/"))
		assert.Equal(t, 502, got.Status)
		assert.True(t, strings.HasPrefix(got.Header["L5d-Proxy-Error"], "upstream: "), got.Header["L5d-Proxy-Error"])
		assert.Equal(t, textAnswer(502, "upstream", strings.TrimPrefix(got.Header["L5d-Proxy-Error"], "upstream: ")), got)
	})

	t.Run("upgrade to an endpoint that refuses connections", func(t *testing.T) {
		o := startOutboundOnly(t, target)
		port := closedPort(t)
		o.resolver.Set(target, dataplane.Endpoint{Addr: netipAddrPort(port)})
		msg := fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", port)
		assert.Equal(t, textAnswer(502, "connect", msg), rawAnswer(t, o.addr, wsHead))
	})

	t.Run("upgrade with a body", func(t *testing.T) {
		app := startHTTPApp(t)
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(app))
		head := strings.Replace(wsHead, "\r\n\r\n", "\r\nContent-Length: 2\r\n\r\nhi", 1)
		assert.Equal(t, textAnswer(400, "upgrade-with-body", "an upgrade request may not have a body"), rawAnswer(t, o.addr, head))
	})
}

// The upgrade path picks its backend and endpoint with the same step as
// every other request, and its own answers are counted like the others.
func TestUpgradesPickLikeEveryRequestAndTheirAnswersAreCounted(t *testing.T) {
	const target = "ws.shop.svc.cluster.local:80"

	t.Run("without endpoints the answer names the backend", func(t *testing.T) {
		o := startOutboundOnly(t, target)
		o.resolver.Set(target)
		assert.Equal(t, textAnswer(503, "no-endpoints", target+" has no endpoints"), rawAnswer(t, o.addr, wsHead))
	})

	t.Run("a backend's injected fault applies to an upgrade", func(t *testing.T) {
		app := startHTTPApp(t)
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(app))
		faulty := &outbound.HttpRoute_RouteBackend{
			Backend: &outbound.Backend{
				Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "Service", Name: target}}},
				Kind: &outbound.Backend_Balancer{Balancer: &outbound.Backend_BalanceP2C{Discovery: &outbound.Backend_EndpointDiscovery{
					Kind: &outbound.Backend_EndpointDiscovery_Dst{Dst: &outbound.Backend_EndpointDiscovery_DestinationGet{Path: target}}}}},
			},
			Filters: []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{
				Status: 503, Message: "backend chaos", Ratio: &httproute.Ratio{Numerator: 1, Denominator: 1}}}}},
		}
		o.outbound.Set(target, policyWith(nil, &outbound.HttpRoute_Rule{Backends: &outbound.HttpRoute_Distribution{
			Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{
				Backends: []*outbound.HttpRoute_RouteBackend{faulty}}}}}))
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := get(t, h1Client(), o.url("/"))
			return resp.StatusCode == http.StatusServiceUnavailable
		}, "the policy reaches the proxy")
		before := app.requests.Load()
		assert.Equal(t, textAnswer(503, "fault-injected", "backend chaos"), rawAnswer(t, o.addr, wsHead))
		assert.Equal(t, before, app.requests.Load(), "the upgrade never reaches the application")
	})

	t.Run("every endpoint failing is unavailable, not no-endpoints", func(t *testing.T) {
		bad := startHTTPApp(t)
		bad.handler = func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, endpointOf(bad))
		accrual := &outbound.FailureAccrual{Kind: &outbound.FailureAccrual_ConsecutiveFailures_{ConsecutiveFailures: &outbound.FailureAccrual_ConsecutiveFailures{
			MaxFailures: 2,
			Backoff:     &outbound.ExponentialBackoff{MinBackoff: durationpb.New(time.Minute), MaxBackoff: durationpb.New(time.Hour)},
		}}}
		o.outbound.Set(target, policyWith(accrual, &outbound.HttpRoute_Rule{}))
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := get(t, h1Client(), o.url("/"))
			return resp.StatusCode == http.StatusServiceUnavailable
		}, "the endpoint is ejected")
		assert.Equal(t, textAnswer(503, "unavailable", "every endpoint of "+target+" is failing"), rawAnswer(t, o.addr, wsHead))
	})

	t.Run("a failed dial is counted in http_errors_total", func(t *testing.T) {
		o := startOutboundOnly(t, target)
		o.resolver.Set(target, dataplane.Endpoint{Addr: netipAddrPort(closedPort(t))})
		require.Equal(t, 502, rawAnswer(t, o.addr, wsHead).Status)
		assert.Equal(t, 1.0, o.r.metric(t, "http_errors_total", `direction="outbound"`, `reason="connect"`))
	})
}
