package dataplane_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/outbound"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// peerHops are the two ways an HTTP/1.1 request crosses between the
// proxies: HTTP/1.1 over mutual TLS (the default) and HTTP/2 with
// l5d-orig-proto (HTTP1OverH2).
var peerHops = []struct {
	name string
	cfgA func(*dataplane.Config)
}{
	{"h1 hop", nil},
	{"h2 hop", func(c *dataplane.Config) { c.HTTP1OverH2 = true }},
}

func TestHTTP1RequestsCrossTheMeshAndArriveAsHTTP1(t *testing.T) {
	for _, hop := range peerHops {
		t.Run(hop.name, func(t *testing.T) {
			hp := startHTTPPair(t, httpPairOptions{cfgA: hop.cfgA})
			c := h1Client()
			for i := 0; i < 3; i++ {
				resp, body := get(t, c, hp.url("/hello?x=1"))
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Equal(t, "ok\n", body)
			}
			last := hp.app.last()
			assert.Equal(t, "HTTP/1.1", last.Proto, "the inbound proxy restores the client's HTTP/1")
			assert.Equal(t, "/hello?x=1", last.RequestURI)
			assert.Equal(t, []string{idA}, last.Header["L5d-Client-Id"], "the application learns the verified client identity")
			assert.Empty(t, last.Header["L5d-Orig-Proto"], "mesh-internal headers do not reach the application")
			testutil.Eventually(t, 5*time.Second, func() bool {
				return hp.b.metric(t, "response_total", `direction="inbound"`, `status_code="200"`, `classification="success"`) == 3
			}, "the server proxy counts the responses")
			assert.Equal(t, 3.0, hp.a.metric(t, "request_total", `direction="outbound"`, `authority="`+hp.target+`"`, `tls="true"`, `server_id="`+idB+`"`))
			assert.Equal(t, 3.0, hp.a.metric(t, "route_request_total", `direction="outbound"`, `dst="`+hp.target+`"`, `rt_route="default"`))
			assert.Equal(t, 3.0, hp.a.metric(t, "response_latency_ms_count", `direction="outbound"`, `authority="`+hp.target+`"`, `status_code="200"`))
			assert.Equal(t, 3.0, hp.b.metric(t, "request_total", `direction="inbound"`, `client_id="`+idA+`"`, `srv_kind="default"`))
		})
	}
}

func TestHTTP2FromTheApplicationStaysHTTP2(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	c := h2cClient()
	resp, body := get(t, c, hp.url("/trailers"))
	assert.Equal(t, "HTTP/2.0", resp.Proto)
	assert.Equal(t, "body", body)
	assert.Equal(t, "abc123", resp.Trailer.Get("X-Checksum"), "trailers cross both proxies")
	assert.Equal(t, "HTTP/2.0", hp.app.last().Proto)
}

func TestPostBodiesAndStreamingResponsesArriveWhole(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	for name, c := range map[string]*http.Client{"h1": h1Client(), "h2c": h2cClient()} {
		t.Run(name, func(t *testing.T) {
			payload := strings.Repeat("payload-", 100000)
			resp, err := c.Post(hp.url("/echo"), "text/plain", strings.NewReader(payload))
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, len(payload), len(b))
			assert.True(t, string(b) == payload)

			resp, body := get(t, c, hp.url("/stream?n=5"))
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "line 0\nline 1\nline 2\nline 3\nline 4\n", body)
		})
	}
}

func TestWithHTTP1OverH2HTTP1ConnectionsShareAFewPooledHTTP2ConnectionsBetweenProxies(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{cfgA: func(c *dataplane.Config) { c.HTTP1OverH2 = true }})
	for i := 0; i < 20; i++ {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
		resp, _ := get(t, c, hp.url("/"))
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
			resp, err := c.Get(hp.url("/sleep?d=50ms"))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(40), hp.app.requests.Load())
	assert.LessOrEqual(t, hp.inB.accepted.Load(), int32(2), "40 client connections, concurrent ones included, crossed on one multiplexed connection")
	assert.Equal(t, "HTTP/1.1", hp.app.last().Proto, "the inbound proxy restored the version l5d-orig-proto carried")
}

func TestIdleStreamsTimeOut(t *testing.T) {
	hp := startHTTPPair(t, httpPairOptions{})
	// The idle timeout is 100 times the stream's 10 ms between lines: a
	// machine busy enough to stall a line for a second (stress-ng beside
	// the race detector stalled one for 200 ms) is not what is tested.
	hp.outbound.Set(hp.target, policyWith(nil, &outbound.HttpRoute_Rule{Timeouts: &httproute.Timeouts{Idle: durationpb.New(time.Second)}}))
	c := h1Client()
	testutil.Eventually(t, 15*time.Second, func() bool {
		resp, _ := get(t, c, hp.url("/sleep?d=5s"))
		return resp.StatusCode == http.StatusGatewayTimeout && strings.Contains(resp.Header.Get("L5d-Proxy-Error"), "idle-timeout")
	}, "a request waiting without any byte moving times out")
	resp, body := get(t, c, hp.url("/stream?n=40"))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a stream that keeps moving does not (400ms in total, a line every 10 ms)")
	assert.Equal(t, 40, strings.Count(body, "\n"))
}
