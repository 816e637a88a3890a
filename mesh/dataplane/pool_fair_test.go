package dataplane_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// The HTTP/1.1 pool to a peer proxy under one hostile downstream client:
// uploads that send a chunk and then hold their body open, each holding
// a pooled connection for as long as it likes. Another client still gets
// a connection; the hostile client's own requests past its share get an
// answer within the pool's wait deadline; a request that leaves while it
// waits leaves nothing behind.

// attackerUploads is how many held uploads one client makes: its whole
// share of the pool (and, before the share existed, the whole pool).
const attackerUploads = 64

// heldUploads is a pair of proxies whose application holds every upload
// it is sent (reading the body until the client gives up), with
// attackerUploads of them in flight from 127.0.0.1 through the client
// proxy.
type heldUploads struct {
	hp    *httpPair
	conns []net.Conn // the uploads' connections to the client proxy
}

// startHeldUploads starts the pair with cfgA changing the client proxy's
// configuration, and returns once the application holds every upload.
func startHeldUploads(t *testing.T, cfgA func(*dataplane.Config)) *heldUploads {
	t.Helper()
	// 64 mesh handshakes at once under -race on a busy machine can pass
	// the 1 s connect and 5 s detect timeouts of the tests' default
	// configuration; a failed connect is not what this is about (see
	// TestAPeerHoldingEveryRequestBoundsTheConnectionsToItAtSixtyFour).
	const slow = 90 * time.Second
	app := startHTTPApp(t)
	inFlight := make(chan struct{}, attackerUploads+8)
	app.handler = func(w http.ResponseWriter, r *http.Request) {
		// httpApp reads every body to the end before its handler, except
		// on the /echo paths.
		if r.URL.Path == "/echo" {
			var first [5]byte
			if _, err := io.ReadFull(r.Body, first[:]); err != nil {
				return
			}
			inFlight <- struct{}{}
			io.Copy(io.Discard, r.Body) // until the uploader goes away
			return
		}
		io.WriteString(w, "ok\n")
	}
	hp := startHTTPPair(t, httpPairOptions{app: app,
		cfgA: func(c *dataplane.Config) {
			c.ConnectTimeout, c.DetectTimeout = slow, slow
			cfgA(c)
		},
		cfgB: func(c *dataplane.Config) { c.ConnectTimeout, c.DetectTimeout = slow, slow },
	})
	hu := &heldUploads{hp: hp}
	t.Cleanup(func() {
		for _, c := range hu.conns {
			c.Close()
		}
	})
	for i := 0; i < attackerUploads; i++ {
		c, err := net.Dial("tcp", hp.clientAddr)
		require.NoError(t, err)
		hu.conns = append(hu.conns, c)
		_, err = io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: web\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		require.NoError(t, err)
	}
	giveUp := time.After(slow + 10*time.Second)
	for i := 0; i < attackerUploads; i++ {
		select {
		case <-inFlight:
		case <-giveUp:
			t.Fatalf("only %d uploads reached the application", i)
		}
	}
	return hu
}

// from returns an HTTP/1.1 client whose connections come from the
// loopback address src; its timeout only guards against a hang.
func from(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func TestAClientHoldingItsShareOfThePeerPoolLeavesConnectionsForAnother(t *testing.T) {
	hu := startHeldUploads(t, func(*dataplane.Config) {})
	resp, err := from("127.0.0.2").Get(hu.hp.url("/"))
	require.NoError(t, err, "another client's request is answered while one client's uploads hold their connections")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok\n", string(body))
}

func TestARequestPastItsClientsShareOfThePeerPoolIsAnswered503AfterTheWaitDeadline(t *testing.T) {
	// The deadline is the mechanism under test: short, so the test is.
	hu := startHeldUploads(t, func(c *dataplane.Config) { c.HTTPPoolWaitTimeout = 200 * time.Millisecond })
	resp, err := from("127.0.0.1").Get(hu.hp.url("/"))
	require.NoError(t, err, "the attacking client's next request is answered, not left waiting")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.True(t, strings.HasPrefix(resp.Header.Get("L5d-Proxy-Error"), "pool-timeout: this client holds its 64 connections"),
		"l5d-proxy-error names the cause: %q", resp.Header.Get("L5d-Proxy-Error"))
	assert.Equal(t, 1.0, hu.hp.a.metric(t, "response_total", `direction="outbound"`, `error="pool-timeout"`), "counted under its cause")
	assert.Equal(t, int32(attackerUploads), hu.hp.app.requests.Load(), "the request never reached the application")
}

func TestARequestWaitingForAPooledConnectionStopsWaitingWhenItsClientLeaves(t *testing.T) {
	hu := startHeldUploads(t, func(c *dataplane.Config) { c.HTTPPoolWaitTimeout = time.Hour })
	c, err := net.Dial("tcp", hu.hp.clientAddr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: web\r\n\r\n")
	require.NoError(t, err)
	testutil.Eventually(t, 10*time.Second, func() bool { return dataplane.PeerH1WaitingForTest(hu.hp.a.proxy) == 1 },
		"the request past its client's share waits for a connection")
	c.Close()
	testutil.Eventually(t, 10*time.Second, func() bool { return dataplane.PeerH1WaitingForTest(hu.hp.a.proxy) == 0 },
		"the request stopped waiting when its client left")
	assert.Equal(t, int32(attackerUploads), hu.hp.app.requests.Load(), "the request never reached the application")

	// The pool still serves that client once one of its connections
	// comes back.
	hu.conns[0].Close()
	resp, err := from("127.0.0.1").Get(hu.hp.url("/"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}
