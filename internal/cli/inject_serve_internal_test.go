package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/grpclimit"
)

// TestTheWebhookServerCapsTheConnectionsOfOneClient serves the webhooks
// the way `weft-controller injector` does (serveWebhooks on a listener
// under the connection caps) with a per-peer cap of 2: a third TLS
// connection from one address is closed before its handshake, while
// another address is served.
func TestTheWebhookServerCapsTheConnectionsOfOneClient(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "anchor"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: "injector", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	mux := http.NewServeMux()
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	lis := testutil.Listen(t)
	conns := grpclimit.NewConnections(10, 2)
	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	done := make(chan error, 1)
	go func() {
		done <- serveWebhooks(ctx, lis, conns, mux, leaf.TLS, slog.New(slog.DiscardHandler), func() <-chan time.Time { return time.After(0) })
	}()
	t.Cleanup(func() { cancel(); <-done })

	cfg := &tls.Config{RootCAs: testutil.Pool(anchor), ServerName: "127.0.0.1"}
	handshake := func(src string) (*tls.Conn, error) {
		d := &net.Dialer{Timeout: testutil.DefaultTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := tls.DialWithDialer(d, "tcp", lis.Addr().String(), cfg)
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return c, err
	}
	for i := range 2 {
		_, err := handshake("127.0.0.1")
		require.NoError(t, err, "connection %d", i)
	}
	_, err := handshake("127.0.0.1")
	require.Error(t, err, "a third connection from one address was served")
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "the third connection hung instead of being closed: %v", err)
	assert.Equal(t, uint64(1), conns.Refused())

	d := &net.Dialer{Timeout: testutil.DefaultTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	client := &http.Client{Timeout: testutil.DefaultTimeout, Transport: &http.Transport{TLSClientConfig: cfg, DialContext: d.DialContext}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + lis.Addr().String() + "/live")
	require.NoError(t, err, "another address")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestTheWebhookServerKeepsServingThroughItsShutdownDelay stops the
// webhook server the way SIGTERM does (its context ends): until the
// shutdown delay is over it still answers the webhooks, on the connection
// it had and on new ones, while /ready fails so the Service stops routing
// to it; then it closes its listener and returns.
func TestTheWebhookServerKeepsServingThroughItsShutdownDelay(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "anchor"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: "injector", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	mux := http.NewServeMux()
	mux.HandleFunc("/inject", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	lis := testutil.Listen(t)
	addr := lis.Addr().String()
	ctx, cancel := context.WithCancel(testutil.Context(t, 0))
	defer cancel()
	delayAsked := make(chan struct{})
	delayOver := make(chan time.Time)
	done := make(chan error, 1)
	go func() {
		done <- serveWebhooks(ctx, lis, grpclimit.NewConnections(10, 10), mux, leaf.TLS, slog.New(slog.DiscardHandler), func() <-chan time.Time {
			close(delayAsked)
			return delayOver
		})
	}()

	cfg := &tls.Config{RootCAs: testutil.Pool(anchor), ServerName: "127.0.0.1"}
	client := func() *http.Client {
		return &http.Client{Timeout: testutil.DefaultTimeout, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	status := func(c *http.Client, path string) int {
		t.Helper()
		resp, err := c.Get("https://" + addr + path)
		require.NoError(t, err, path)
		resp.Body.Close()
		return resp.StatusCode
	}
	kept := client()
	defer kept.CloseIdleConnections()
	require.Equal(t, http.StatusOK, status(kept, "/ready"), "ready while serving")

	cancel()
	select {
	case <-delayAsked:
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("the server did not enter its shutdown delay")
	}
	assert.Equal(t, http.StatusServiceUnavailable, status(kept, "/ready"), "ready during the shutdown delay")
	assert.Equal(t, http.StatusOK, status(kept, "/inject"), "the kept-alive connection is still served")
	fresh := client()
	defer fresh.CloseIdleConnections()
	assert.Equal(t, http.StatusOK, status(fresh, "/inject"), "a new connection is still served")

	close(delayOver)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testutil.DefaultTimeout):
		t.Fatal("the server did not stop after its shutdown delay")
	}
	_, err := net.DialTimeout("tcp", addr, testutil.DefaultTimeout)
	assert.Error(t, err, "the listener is closed after the delay")
}
