package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"testing"

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
	go func() { done <- serveWebhooks(ctx, lis, conns, mux, leaf.TLS, slog.New(slog.DiscardHandler)) }()
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
