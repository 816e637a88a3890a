package proxytrace_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/cli/proxytrace"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/internal/testutil/otlptest"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

const (
	proxyID     = "web.shop.serviceaccount.identity.linkerd.cluster.local"
	collectorID = "otel-collector.tracing.serviceaccount.identity.linkerd.cluster.local"
)

// weft-proxy's wiring: a proxy started with Start's option exports the
// spans of a traced request over mesh TLS to the collector's identity,
// and the stop function flushes them after the proxy has drained.
func TestStartExportsTheProxysSpansOverMeshTLSAndFlushesOnStop(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.linkerd.cluster.local"})
	issuer := anchor.Issuer(t, testutil.CertOptions{Name: "identity.linkerd.cluster.local"})
	id, err := dataplane.NewStaticIdentity(proxyID, issuer.Leaf(t, testutil.CertOptions{Name: proxyID}).TLS, testutil.Pool(anchor))
	require.NoError(t, err)
	col := otlptest.StartTLS(t, &tls.Config{
		Certificates: []tls.Certificate{issuer.Leaf(t, testutil.CertOptions{Name: collectorID}).TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: testutil.Pool(anchor), MinVersion: tls.VersionTLS13,
	})

	app := testutil.Listen(t)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("Traceparent"))
	})}
	go srv.Serve(app)
	t.Cleanup(func() { srv.Close() })
	port := app.Addr().(*net.TCPAddr).Port
	target := fmt.Sprintf("app.local:%d", port)
	res := dataplane.NewMemoryResolver()
	res.Set(target, dataplane.Endpoint{Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))})

	cfg := tracing.Config{CollectorAddr: col.Addr(), CollectorIdentity: collectorID, ServiceName: "web-proxy"}
	opt, stop, err := proxytrace.Start(testutil.Context(t, 0), cfg, id, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := dataplane.New(ctx, dataplane.DefaultConfig(), id, res, nil, opt)
	require.NoError(t, err)
	mapped := testutil.Listen(t)
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: target}}, Admin: testutil.Listen(t)})
	}()

	req, err := http.NewRequest(http.MethodGet, "http://"+mapped.Addr().String()+"/", nil)
	require.NoError(t, err)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case <-done:
	case <-testutil.Context(t, 0).Done():
		t.Fatal("proxy did not stop")
	}
	stop() // flushes: the span is at the collector when it returns
	spans := col.Spans()
	require.Len(t, spans, 1)
	assert.Equal(t, "00-4bf92f3577b34da6a3ce929d0e0e4736-"+spans[0].SpanID()+"-01", string(body), "the app sees the proxy's span as its parent")
	assert.Equal(t, "00f067aa0ba902b7", spans[0].ParentID())
	assert.Equal(t, "web-proxy", spans[0].Resource["service.name"])
	assert.Equal(t, []string{proxyID}, col.Peers(), "exported over mesh TLS with the proxy's identity")
}

func TestStartRefusesSettingsWithoutACollector(t *testing.T) {
	_, _, err := proxytrace.Start(testutil.Context(t, 0), tracing.Config{}, nil, slog.New(slog.DiscardHandler))
	require.Error(t, err)
}
