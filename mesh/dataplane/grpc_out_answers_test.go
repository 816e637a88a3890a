package dataplane_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// plainGRPCCall sends a unary gRPC-shaped request (one empty message)
// over h2c without content-length, as gRPC clients do: a call the client
// proxy's frame path takes. It returns the proxy's answer and the whole
// response header and trailers.
func plainGRPCCall(t testing.TB, url string) (answer, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	c := h2cClient()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answerOf(resp, string(b)), resp
}

// The client proxy's own answers to gRPC calls, and its route filters,
// are the same on the frame path as on the http path: the trailers-only
// answer with its gRPC status, l5d-proxy-error class and message (as
// TestOutboundAnswersToFailuresNameTheirCauseInStatusHeaderAndGRPCStatus
// pins them), for each cause a call can meet before or instead of its
// response.
func TestTheOutboundFramePathAnswersGRPCCallsAsTheHTTPPath(t *testing.T) {
	const target = "answers.shop.svc.cluster.local:80"
	rule := func(r *outbound.HttpRoute_Rule) *outbound.OutboundPolicy { return policyWith(nil, r) }
	waitFor := func(t *testing.T, o *outboundOnly, status int) {
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := get(t, h1Client(), o.url("/"))
			return resp.StatusCode == status
		}, "the policy reaches the proxy")
	}
	blocking := func(t *testing.T) *httpApp {
		app := startHTTPApp(t)
		app.handler = func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
		return app
	}
	for _, tc := range []struct {
		name   string
		policy *outbound.OutboundPolicy
		app    func(t *testing.T) *httpApp // nil: no endpoints
		status int                         // what an HTTP/1 request gets once the policy applies
		want   answer
	}{
		{name: "no endpoints", want: grpcAnswer(14, "no-endpoints", target+" has no endpoints")},
		{name: "no route matches", app: func(t *testing.T) *httpApp { return startHTTPApp(t) }, status: 404,
			policy: rule(&outbound.HttpRoute_Rule{Matches: []*httproute.HttpRouteMatch{{
				Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/only"}}}}}),
			want: grpcAnswer(12, "no-route", "no route matches the request")},
		{name: "route injects a fault", app: func(t *testing.T) *httpApp { return startHTTPApp(t) }, status: 502,
			policy: rule(&outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{{
				Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{
					Status: 502, Message: "chaos monkey", Ratio: &httproute.Ratio{Numerator: 1, Denominator: 1}}}}}}),
			want: grpcAnswer(14, "fault-injected", "chaos monkey")},
		{name: "response head too late", app: blocking, status: 504,
			policy: rule(&outbound.HttpRoute_Rule{Timeouts: &httproute.Timeouts{Response: durationpb.New(50 * time.Millisecond)}}),
			want:   grpcAnswer(4, "response-timeout", "no response within 50ms")},
		{name: "whole request too late", app: blocking, status: 504,
			policy: rule(&outbound.HttpRoute_Rule{Timeouts: &httproute.Timeouts{Request: durationpb.New(50 * time.Millisecond)}}),
			want:   grpcAnswer(4, "request-timeout", "the request timed out")},
		{name: "nothing moves", app: blocking, status: 504,
			policy: rule(&outbound.HttpRoute_Rule{Timeouts: &httproute.Timeouts{Idle: durationpb.New(50 * time.Millisecond)}}),
			want:   grpcAnswer(4, "idle-timeout", "nothing moved within 50ms")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onBothOutboundPaths(t, 1, func(t *testing.T, opts ...dataplane.Option) {
				o := startOutboundOnly(t, target, opts...)
				if tc.app == nil {
					o.resolver.Set(target)
				} else {
					o.resolver.Set(target, endpointOf(tc.app(t)))
				}
				if tc.policy != nil {
					o.outbound.Set(target, tc.policy)
					waitFor(t, o, tc.status)
				}
				got, _ := plainGRPCCall(t, o.url("/pkg.Svc/Call"))
				assert.Equal(t, tc.want, got)
			})
		})
	}

	t.Run("redirect", func(t *testing.T) {
		var locations []string
		onBothOutboundPaths(t, 1, func(t *testing.T, opts ...dataplane.Option) {
			o := startOutboundOnly(t, target, opts...)
			o.resolver.Set(target, endpointOf(startHTTPApp(t)))
			o.outbound.Set(target, rule(&outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{{
				Kind: &outbound.HttpRoute_Filter_Redirect{Redirect: &httproute.RequestRedirect{
					Path: &httproute.PathModifier{Replace: &httproute.PathModifier_Prefix{Prefix: "/moved"}}, Status: 308}}}}}))
			c := h1Client()
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			testutil.Eventually(t, 5*time.Second, func() bool {
				resp, _ := get(t, c, o.url("/"))
				return resp.StatusCode == http.StatusPermanentRedirect
			}, "the policy reaches the proxy")
			got, resp := plainGRPCCall(t, o.url("/pkg.Svc/Call"))
			assert.Equal(t, answer{Status: http.StatusPermanentRedirect, Header: map[string]string{"Content-Length": "0"}}, got)
			loc := resp.Header.Get("Location")
			assert.True(t, strings.HasPrefix(loc, "http://"+o.addr+"/"), loc)
			locations = append(locations, strings.TrimPrefix(loc, "http://"+o.addr))
		})
		require.Len(t, locations, 2)
		assert.Equal(t, locations[0], locations[1], "the same location on both paths")
	})

	t.Run("route filters", func(t *testing.T) {
		onBothOutboundPaths(t, 1, func(t *testing.T, opts ...dataplane.Option) {
			app := startHTTPApp(t)
			app.handler = func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/grpc")
				w.Header().Set("X-Drop", "gone")
				w.Header().Set("X-Seen", r.Header.Get("X-Routed-By"))
				w.Header().Set("Trailer", "Grpc-Status")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write([]byte{0, 0, 0, 0, 0})
				w.Header().Set("Grpc-Status", "0")
			}
			o := startOutboundOnly(t, target, opts...)
			o.resolver.Set(target, endpointOf(app))
			o.outbound.Set(target, rule(&outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{
				{Kind: &outbound.HttpRoute_Filter_RequestHeaderModifier{RequestHeaderModifier: &httproute.RequestHeaderModifier{
					Set: &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-routed-by", Value: []byte("weft")}}}}}},
				{Kind: &outbound.HttpRoute_Filter_ResponseHeaderModifier{ResponseHeaderModifier: &httproute.ResponseHeaderModifier{
					Add:    &httptypes.Headers{Headers: []*httptypes.Headers_Header{{Name: "x-route", Value: []byte("filtered")}}},
					Remove: []string{"x-drop"}}}},
			}}))
			testutil.Eventually(t, 5*time.Second, func() bool {
				resp, _ := get(t, h1Client(), o.url("/"))
				return resp.Header.Get("X-Route") == "filtered"
			}, "the policy reaches the proxy")
			_, resp := plainGRPCCall(t, o.url("/pkg.Svc/Call"))
			assert.Equal(t, "weft", resp.Header.Get("X-Seen"), "the request filter")
			assert.Equal(t, "filtered", resp.Header.Get("X-Route"), "the response filter adds")
			assert.Empty(t, resp.Header.Values("X-Drop"), "the response filter removes")
			assert.Equal(t, "0", resp.Trailer.Get("Grpc-Status"))
		})
	})
}

// A tap on the client proxy sees the proxy's own answer to a gRPC call
// (here a fault the route injects) the same on both paths: request,
// response head (content-length included) and end.
func TestTheOutboundTapSeesTheProxysGRPCAnswersTheSameOnBothPaths(t *testing.T) {
	var events [][]string
	onBothOutboundPaths(t, 1, func(t *testing.T, opts ...dataplane.Option) {
		hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), cfgA: tapConfig, optsA: opts})
		hp.outbound.Set(hp.target, policyWith(nil, &outbound.HttpRoute_Rule{Filters: []*outbound.HttpRoute_Filter{{
			Kind: &outbound.HttpRoute_Filter_FailureInjector{FailureInjector: &httproute.HttpFailureInjector{
				Status: 503, Message: "chaos monkey", Ratio: &httproute.Ratio{Numerator: 1, Denominator: 1}}}}}}))
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := get(t, h1Client(), hp.url("/"))
			return resp.StatusCode == 503
		}, "the policy reaches the proxy")
		tap := openTap(t, tapConn(t, hp.pki, idTapper, hp.tapA, idA), hp.a,
			&ptap.ObserveRequest{Limit: 1, Match: pathPrefix("/pkg.Svc/"), Extract: withHeaders()}, 1)
		got, _ := plainGRPCCall(t, hp.url("/pkg.Svc/Call"))
		assert.Equal(t, grpcAnswer(14, "fault-injected", "chaos monkey"), got)
		ev := tapEventsOf(t, tap, false)
		require.Len(t, ev, 3, "request, response head and end")
		assert.Contains(t, ev[1], "fault-injected: chaos monkey")
		events = append(events, ev)
	})
	require.Len(t, events, 2)
	assert.Equal(t, events[1], events[0], "the tap's events on both paths")
}
