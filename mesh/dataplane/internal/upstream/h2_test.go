package upstream_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
)

// replayable sends a request without a body once more; notReplayable
// never sends one again.
func replayable() (io.ReadCloser, bool) { return nil, true }

var notReplayable func() (io.ReadCloser, bool)

// Requests to one h2c upstream share one connection, counted once with
// the labels of the request that dialled it; Sweep keeps the upstream
// while the connection lives and forgets it once the server closed it;
// after CloseAll the pool refuses.
func TestTheH2PoolSharesAConnectionAndForgetsItsUpstreamOnceClosed(t *testing.T) {
	app := startH2CPeer(t)
	d := &dials{}
	pool := upstream.NewH2(d.dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)
	key := upstream.Key{Addr: app.addr}
	in := upstream.Labels{Inbound: true}

	for i := 0; i < 3; i++ {
		require.NoError(t, readOK(pool.RoundTrip(key, get(t, "/"), notReplayable, in)))
	}
	assert.Equal(t, []upstream.Labels{in}, d.counted(), "one connection, dialled plain (no identity) and counted once")
	assert.Empty(t, d.peerDials())
	pool.Sweep()
	assert.Equal(t, 1, pool.UpstreamsForTest(), "its connection is live")

	app.closeConns()
	testutil.Eventually(t, 0, func() bool {
		pool.Sweep()
		return pool.UpstreamsForTest() == 0
	}, "the upstream whose connection the server closed to be forgotten")

	// A new connection on the next request.
	require.NoError(t, readOK(pool.RoundTrip(key, get(t, "/"), notReplayable, in)))
	assert.Len(t, d.counted(), 2)

	pool.CloseAll()
	_, err := pool.Get(testutil.Context(t, 0), key, in)
	var de *httpcore.DialError
	require.ErrorAs(t, err, &de)
	assert.EqualError(t, err, "dataplane: proxy is stopping")
	assert.Equal(t, int32(2), d.closed.Load(), "CloseAll closed the live connection")
}

// A failed dial is a dial error naming the address; nothing is counted.
func TestAFailedDialIsADialErrorNamingTheUpstream(t *testing.T) {
	d := &dials{} // no TLS peer: Peer fails
	pool := upstream.NewH2(d.dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)
	key := upstream.Key{Addr: netipAddrPort(t, "127.0.0.1:9"), Identity: peerIdentity, Port: 8080}
	_, err := pool.RoundTrip(key, get(t, "/"), replayable, upstream.Labels{})
	var de *httpcore.DialError
	require.ErrorAs(t, err, &de)
	assert.EqualError(t, err, "dataplane: connecting to 127.0.0.1:9: test: no TLS peer")
	assert.Empty(t, d.counted())
	require.Len(t, d.peerDials(), 1, "a key with an identity dials the peer with mesh TLS")
}

// A request the upstream refused without processing it is sent once
// more when its body can be replayed, and answered by the second try.
func TestARefusedRequestIsSentOnceMoreWhenItsBodyCanBeReplayed(t *testing.T) {
	peer := startRefusingPeer(t, func(n int, _ string) bool { return n == 1 })
	pool := upstream.NewH2((&dials{}).dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)

	resp, err := pool.RoundTrip(upstream.Key{Addr: peer.addr}, get(t, "/x"), replayable, upstream.Labels{})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, []string{"/x", "/x"}, drain(peer.paths))
}

// The second try of a refused request with a body sends the body again
// from its start, as again gives it: never the first try's reader,
// which the HTTP/2 client has read from and closed. And a body again
// will not give is not sent a second time.
func TestARefusedRequestsSecondTrySendsTheWholeBodyAgain(t *testing.T) {
	peer := startRefusingPeer(t, func(n int, _ string) bool { return n == 1 })
	pool := upstream.NewH2((&dials{}).dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)
	const body = "the whole request body"
	post := func(path string) *http.Request {
		req, err := http.NewRequestWithContext(testutil.Context(t, 0), http.MethodPost, "http://web.default:8080"+path, strings.NewReader(body))
		require.NoError(t, err)
		return req
	}
	var agains int
	again := func() (io.ReadCloser, bool) {
		agains++
		return io.NopCloser(strings.NewReader(body)), true
	}
	resp, err := pool.RoundTrip(upstream.Key{Addr: peer.addr}, post("/post"), again, upstream.Labels{})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1, agains)
	assert.Equal(t, []string{"/post", "/post"}, drain(peer.paths))
	assert.Equal(t, []string{body}, drain(peer.bodies), "the second try carried the whole body")

	refusedOnce := startRefusingPeer(t, func(n int, _ string) bool { return n == 1 })
	never := func() (io.ReadCloser, bool) { return nil, false }
	_, err = pool.RoundTrip(upstream.Key{Addr: refusedOnce.addr}, post("/kept-nowhere"), never, upstream.Labels{})
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	assert.Equal(t, []string{"/kept-nowhere"}, drain(refusedOnce.paths))
}

// Never a third time: a request refused twice fails with the HTTP/2
// client's unprocessed error. And a request whose body cannot be sent
// again is not sent again.
func TestARefusedRequestIsNotSentAThirdTimeNorAgainWithoutItsBody(t *testing.T) {
	peer := startRefusingPeer(t, func(_ int, path string) bool { return path != "/ok" })
	pool := upstream.NewH2((&dials{}).dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)
	key := upstream.Key{Addr: peer.addr}

	_, err := pool.RoundTrip(key, get(t, "/twice"), replayable, upstream.Labels{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, h2client.ErrUnprocessed), "%v", err)
	_, err = pool.RoundTrip(key, get(t, "/once"), notReplayable, upstream.Labels{})
	require.ErrorIs(t, err, h2client.ErrUnprocessed)
	// Streams on one connection arrive in order: a third /twice or a
	// second /once would come before /ok.
	resp, err := pool.RoundTrip(key, get(t, "/ok"), notReplayable, upstream.Labels{})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{"/twice", "/twice", "/once", "/ok"}, drain(peer.paths))
}

// The frame path's round trip goes on the same pooled connections.
func TestRoundTripFieldsUsesThePooledConnection(t *testing.T) {
	app := startH2CPeer(t)
	d := &dials{}
	pool := upstream.NewH2(d.dialer(), upstream.Settings{})
	t.Cleanup(pool.CloseAll)
	key := upstream.Key{Addr: app.addr}
	in := upstream.Labels{Inbound: true}
	require.NoError(t, readOK(pool.RoundTrip(key, get(t, "/"), notReplayable, in)))

	ctx := testutil.Context(t, 0)
	resp, err := pool.RoundTripFields(ctx, key, &h2client.FieldRequest{Method: "GET", Scheme: "http", Authority: "app", Path: "/fields"}, in)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.Status)
	assert.Equal(t, "ok", string(b))
	assert.Len(t, d.counted(), 1, "no second connection")
}

// drain returns what a channel holds now.
func drain(c chan string) []string {
	var out []string
	for {
		select {
		case s := <-c:
			out = append(out, s)
		default:
			return out
		}
	}
}
