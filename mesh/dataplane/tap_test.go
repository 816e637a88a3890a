package dataplane_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// idTapper is the identity the proxies accept as a tapper in these tests.
const idTapper = "tap.weft-viz.serviceaccount.identity.linkerd.cluster.local"

// tapConn dials a proxy's tap listener over mutual TLS with a certificate
// for name issued by pk (the mesh's PKI unless the test says otherwise).
func tapConn(t testing.TB, pk *pki, name string, l net.Listener, serverID string) ptap.TapClient {
	t.Helper()
	cfg := &tls.Config{RootCAs: testutil.Pool(pk.anchor), ServerName: serverID, MinVersion: tls.VersionTLS13}
	if name != "" {
		leaf := pk.issuer.Leaf(t, testutil.CertOptions{Name: name})
		cfg.Certificates = []tls.Certificate{leaf.TLS}
	}
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return ptap.NewTapClient(conn)
}

func pathPrefix(p string) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Http_{Http: &ptap.ObserveRequest_Match_Http{
		Match: &ptap.ObserveRequest_Match_Http_Path{Path: &ptap.ObserveRequest_Match_Http_StringMatch{
			Match: &ptap.ObserveRequest_Match_Http_StringMatch_Prefix{Prefix: p}}}}}}
}

func anyOf(ms ...*ptap.ObserveRequest_Match) *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Any{Any: &ptap.ObserveRequest_Match_Seq{Matches: ms}}}
}

func everything() *ptap.ObserveRequest_Match {
	return &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_All{All: &ptap.ObserveRequest_Match_Seq{}}}
}

func withHeaders() *ptap.ObserveRequest_Extract {
	return &ptap.ObserveRequest_Extract{Extract: &ptap.ObserveRequest_Extract_Http_{Http: &ptap.ObserveRequest_Extract_Http{
		Extract: &ptap.ObserveRequest_Extract_Http_Headers_{Headers: &ptap.ObserveRequest_Extract_Http_Headers{}}}}}
}

// openTap opens a tap and waits until the proxy counts it open.
func openTap(t testing.TB, c ptap.TapClient, r *running, req *ptap.ObserveRequest, open float64) ptap.Tap_ObserveClient {
	t.Helper()
	stream, err := c.Observe(ctxTimeout(t, 60*time.Second), req)
	require.NoError(t, err)
	testutil.Eventually(t, 10*time.Second, func() bool { return r.metric(t, "tap_streams_open") == open }, "the tap is registered")
	return stream
}

func tapConfig(c *dataplane.Config) { c.TapIdentities = []string{idTapper} }

func header(h *httptypes.Headers, name string) string {
	for _, f := range h.GetHeaders() {
		if f.GetName() == name {
			return string(f.GetValue())
		}
	}
	return ""
}

func TestTapRefusesCallersThatAreNotAcceptedTappers(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig})
	req := &ptap.ObserveRequest{Limit: 10, Match: everything()}

	t.Run("a mesh identity that is not a tapper", func(t *testing.T) {
		// Closed right after its handshake (internal/tap/gate.go): it never gets
		// to send a request, let alone hold a connection slot.
		stream, err := tapConn(t, hp.pki, idC, hp.tapA, idA).Observe(ctxTimeout(t, 10*time.Second), req)
		if err == nil {
			_, err = stream.Recv()
		}
		assert.Equal(t, codes.Unavailable, status.Code(err), "got %v", err)
		assert.GreaterOrEqual(t, hp.a.metric(t, "tcp_refused_total", `direction="tap"`, `reason="not-a-tapper"`), 1.0)
		assert.Equal(t, -1.0, hp.a.metric(t, "tap_streams_refused_total", `reason="identity"`), "no stream of it was read")
	})
	t.Run("a certificate from another authority", func(t *testing.T) {
		stream, err := tapConn(t, newPKI(t), idTapper, hp.tapA, idA).Observe(ctxTimeout(t, 10*time.Second), req)
		if err == nil {
			_, err = stream.Recv()
		}
		require.Error(t, err)
		assert.NotEqual(t, codes.OK, status.Code(err))
	})
	t.Run("no client certificate", func(t *testing.T) {
		stream, err := tapConn(t, hp.pki, "", hp.tapA, idA).Observe(ctxTimeout(t, 10*time.Second), req)
		if err == nil {
			_, err = stream.Recv()
		}
		require.Error(t, err)
	})
	t.Run("a tapper with a bad request", func(t *testing.T) {
		c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
		for _, bad := range []*ptap.ObserveRequest{
			{Limit: 0, Match: everything()},
			{Limit: 1},
			{Limit: 1, Match: &ptap.ObserveRequest_Match{Match: &ptap.ObserveRequest_Match_Destination{Destination: &ptap.ObserveRequest_Match_Tcp{
				Match: &ptap.ObserveRequest_Match_Tcp_Ports{Ports: &ptap.ObserveRequest_Match_Tcp_PortRange{Min: 9000, Max: 80}}}}}},
		} {
			stream, err := c.Observe(ctxTimeout(t, 10*time.Second), bad)
			require.NoError(t, err)
			_, err = stream.Recv()
			assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v: %v", bad, err)
		}
	})
	assert.Equal(t, 0.0, hp.a.metric(t, "tap_streams_open"))
}

func TestTapReportsRealRequestsThroughRealProxies(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: tapConfig, cfgB: tapConfig})
	outTap := openTap(t, tapConn(t, hp.pki, idTapper, hp.tapA, idA), hp.a, &ptap.ObserveRequest{
		Limit: 2, Match: anyOf(pathPrefix("/hello"), pathPrefix("/status/")), Extract: withHeaders(),
	}, 1)
	inTap := openTap(t, tapConn(t, hp.pki, idTapper, hp.tapB, idB), hp.b, &ptap.ObserveRequest{
		Limit: 1, Match: pathPrefix("/hello"),
	}, 1)

	c := h1Client()
	resp, _ := get(t, c, hp.url("/skipped"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body := get(t, c, hp.url("/hello?x=1"), "X-Trace", "abc")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get(t, c, hp.url("/status/503"))
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	// The outbound tap took its two requests and ends once both ended.
	var out []*ptap.TapEvent
	for {
		ev, err := outTap.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		out = append(out, ev)
	}
	require.Len(t, out, 6, "request init, response init and response end of each of the two requests")
	byStream := map[uint64][]*ptap.TapEvent{}
	for _, ev := range out {
		var id *ptap.TapEvent_Http_StreamId
		switch e := ev.GetHttp().GetEvent().(type) {
		case *ptap.TapEvent_Http_RequestInit_:
			id = e.RequestInit.GetId()
		case *ptap.TapEvent_Http_ResponseInit_:
			id = e.ResponseInit.GetId()
		case *ptap.TapEvent_Http_ResponseEnd_:
			id = e.ResponseEnd.GetId()
		}
		byStream[id.GetStream()] = append(byStream[id.GetStream()], ev)
	}
	require.Len(t, byStream, 2)

	hello := byStream[0]
	require.Len(t, hello, 3)
	init := hello[0].GetHttp().GetRequestInit()
	require.NotNil(t, init, "the request head comes first")
	assert.Equal(t, ptap.TapEvent_OUTBOUND, hello[0].GetProxyDirection())
	assert.Equal(t, httptypes.HttpMethod_GET, init.GetMethod().GetRegistered())
	assert.Equal(t, httptypes.Scheme_HTTP, init.GetScheme().GetRegistered())
	assert.Equal(t, hp.clientAddr, init.GetAuthority())
	assert.Equal(t, "/hello", init.GetPath())
	assert.Equal(t, "abc", header(init.GetHeaders(), "x-trace"), "headers are extracted when asked for")
	assert.Equal(t, uint32(hp.app.port()), hello[0].GetDestination().GetPort(), "the endpoint the request went to")
	assert.Equal(t, map[string]string{"tls": "true", "server_id": idB}, hello[0].GetDestinationMeta().GetLabels())
	assert.Equal(t, map[string]string{"tls": "loopback"}, hello[0].GetSourceMeta().GetLabels())
	assert.NotZero(t, hello[0].GetSource().GetPort(), "the application's socket")
	assert.Equal(t, "default", hello[0].GetRouteMeta().GetLabels()["route"])

	rspInit := hello[1].GetHttp().GetResponseInit()
	require.NotNil(t, rspInit)
	assert.Equal(t, uint32(200), rspInit.GetHttpStatus())
	assert.NotNil(t, rspInit.GetSinceRequestInit())
	end := hello[2].GetHttp().GetResponseEnd()
	require.NotNil(t, end)
	assert.Equal(t, uint64(len(body)), end.GetResponseBytes())
	assert.GreaterOrEqual(t, end.GetSinceRequestInit().AsDuration(), end.GetSinceResponseInit().AsDuration())
	assert.Nil(t, end.GetEos().GetEnd(), "a plain HTTP response ends without gRPC status or reset")

	failed := byStream[1]
	require.Len(t, failed, 3)
	assert.Equal(t, "/status/503", failed[0].GetHttp().GetRequestInit().GetPath())
	assert.Equal(t, uint32(503), failed[1].GetHttp().GetResponseInit().GetHttpStatus())
	for _, ev := range out {
		assert.Equal(t, hello[0].GetHttp().GetRequestInit().GetId().GetBase(), idOf(ev).GetBase(), "one base per tap")
	}

	// The inbound tap saw the same request from the server side.
	var in []*ptap.TapEvent
	for {
		ev, err := inTap.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		in = append(in, ev)
	}
	require.Len(t, in, 3)
	assert.Equal(t, ptap.TapEvent_INBOUND, in[0].GetProxyDirection())
	assert.Equal(t, map[string]string{"tls": "true", "client_id": idA}, in[0].GetSourceMeta().GetLabels())
	assert.Equal(t, "loopback", in[0].GetDestinationMeta().GetLabels()["tls"])
	assert.NotEmpty(t, in[0].GetDestinationMeta().GetLabels()["srv_kind"], "the inbound policy that admitted it")
	assert.Nil(t, in[0].GetHttp().GetRequestInit().GetHeaders(), "no headers unless asked for")
	assert.Equal(t, uint64(len(body)), in[2].GetHttp().GetResponseEnd().GetResponseBytes())

	testutil.Eventually(t, 5*time.Second, func() bool { return hp.a.metric(t, "tap_streams_open") == 0 }, "a finished tap is unregistered")
}

func idOf(ev *ptap.TapEvent) *ptap.TapEvent_Http_StreamId {
	switch e := ev.GetHttp().GetEvent().(type) {
	case *ptap.TapEvent_Http_RequestInit_:
		return e.RequestInit.GetId()
	case *ptap.TapEvent_Http_ResponseInit_:
		return e.ResponseInit.GetId()
	case *ptap.TapEvent_Http_ResponseEnd_:
		return e.ResponseEnd.GetId()
	}
	return nil
}

func TestTapRefusesTapsBeyondTheLimit(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) { tapConfig(c); c.TapMaxTaps = 1 }})
	c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
	openTap(t, c, hp.a, &ptap.ObserveRequest{Limit: 10, Match: everything()}, 1)
	stream, err := c.Observe(ctxTimeout(t, 10*time.Second), &ptap.ObserveRequest{Limit: 10, Match: everything()})
	require.NoError(t, err)
	_, err = stream.Recv()
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "got %v", err)
	assert.Equal(t, 1.0, hp.a.metric(t, "tap_streams_refused_total", `reason="limit"`))
}

func TestASlowTapConsumerLosesEventsButNeverSlowsRequests(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapMaxEventsPerSecond = 1 << 20 // only the buffer limits this tap
	}})
	// The tapper opens a stream and never reads it.
	openTap(t, tapConn(t, hp.pki, idTapper, hp.tapA, idA), hp.a, &ptap.ObserveRequest{Limit: 1 << 30, Match: everything()}, 1)

	// 2,000 requests make 6,000 events: more than the tap's buffer (1,024)
	// plus what HTTP/2 flow control lets the unread stream hold.
	const total = 2000
	c := h2cClient()
	var wg sync.WaitGroup
	var failures sync.Map
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < total; i += 8 {
				resp, err := c.Get(hp.url(fmt.Sprintf("/r/%d", i)))
				if err != nil {
					failures.Store(i, err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					failures.Store(i, resp.Status)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	failures.Range(func(k, v any) bool { n++; t.Logf("request %v: %v", k, v); return n < 5 })
	assert.Zero(t, n, "every request succeeds while the tap is stuck")
	dropped := hp.a.metric(t, "tap_events_dropped_total", `reason="buffer"`)
	sent := hp.a.metric(t, "tap_events_sent_total")
	assert.Positive(t, dropped, "events beyond the buffer are dropped and counted")
	assert.Equal(t, float64(3*total), dropped+sent, "every event is either handed over or counted as dropped")
	assert.Equal(t, float64(total), hp.a.metric(t, "route_request_total", `direction="outbound"`))
}

func TestTapEventsBeyondTheRateAreDroppedAndCounted(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), cfgA: func(c *dataplane.Config) {
		tapConfig(c)
		c.TapMaxEventsPerSecond = 3 // one request per second
	}})
	stream := openTap(t, tapConn(t, hp.pki, idTapper, hp.tapA, idA), hp.a, &ptap.ObserveRequest{Limit: 1000, Match: everything()}, 1)
	received := make(chan struct{}, 1000)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				return
			}
			received <- struct{}{}
		}
	}()
	const total = 50
	c := h1Client()
	for i := 0; i < total; i++ {
		resp, _ := get(t, c, hp.url("/r"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	rate := hp.a.metric(t, "tap_events_dropped_total", `reason="rate"`)
	sent := hp.a.metric(t, "tap_events_sent_total")
	assert.Positive(t, rate, "a burst beyond the budget is dropped")
	assert.Equal(t, float64(3*total), rate+sent, "each request is reported whole or counted whole")
	for i := 0; i < int(sent); i++ {
		select {
		case <-received:
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %v events", i, sent)
		}
	}
}

func TestTwoTapsOfOneRequestEachGetTheirOwnEventsAndOnlyTheAskedForHeaders(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{serverPolicy: allowAll(t), cfgA: tapConfig})
	c := tapConn(t, hp.pki, idTapper, hp.tapA, idA)
	plain := openTap(t, c, hp.a, &ptap.ObserveRequest{Limit: 1, Match: everything()}, 1)
	withHdr := openTap(t, c, hp.a, &ptap.ObserveRequest{Limit: 1, Match: pathPrefix("/both"), Extract: withHeaders()}, 2)

	resp, _ := get(t, h1Client(), hp.url("/both"), "X-Trace", "abc")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	readAll := func(s ptap.Tap_ObserveClient) []*ptap.TapEvent {
		var out []*ptap.TapEvent
		for {
			ev, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return out
			}
			require.NoError(t, err)
			out = append(out, ev)
		}
	}
	a, b := readAll(plain), readAll(withHdr)
	require.Len(t, a, 3)
	require.Len(t, b, 3)
	assert.NotEqual(t, idOf(a[0]).GetBase(), idOf(b[0]).GetBase(), "each tap numbers its requests under its own base")
	for i := range a {
		assert.Equal(t, idOf(a[i]).GetStream(), idOf(b[i]).GetStream())
		assert.Equal(t, a[i].GetDestinationMeta().GetLabels(), b[i].GetDestinationMeta().GetLabels())
		assert.Equal(t, a[i].GetSource().GetPort(), b[i].GetSource().GetPort(), "the same request")
	}
	assert.Nil(t, a[0].GetHttp().GetRequestInit().GetHeaders(), "the tap that did not ask gets no request headers")
	assert.Nil(t, a[1].GetHttp().GetResponseInit().GetHeaders(), "nor response headers")
	assert.Nil(t, a[2].GetHttp().GetResponseEnd().GetTrailers(), "nor trailers")
	assert.Equal(t, "abc", header(b[0].GetHttp().GetRequestInit().GetHeaders(), "x-trace"), "the tap that asked gets them")
	assert.NotEmpty(t, b[1].GetHttp().GetResponseInit().GetHeaders().GetHeaders())
	assert.Equal(t, a[1].GetHttp().GetResponseInit().GetHttpStatus(), b[1].GetHttp().GetResponseInit().GetHttpStatus())
	assert.Equal(t, a[2].GetHttp().GetResponseEnd().GetResponseBytes(), b[2].GetHttp().GetResponseEnd().GetResponseBytes())
}
