package dataplane_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

func TestDrainStopsAcceptingAndLetsOpenConnectionsFinish(t *testing.T) {
	pr := startPair(t, pairOptions{cfgB: func(c *dataplane.Config) { c.ShutdownGracePeriod = 5 * time.Second }})
	c, err := net.DialTimeout("tcp", pr.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, opaque("first"))
	require.NoError(t, err)
	buf := make([]byte, len(opaque("first")))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)

	code, _ := pr.b.admin(t, "/ready")
	require.Equal(t, http.StatusOK, code)
	pr.b.cancel() // SIGTERM
	testutil.Eventually(t, 5*time.Second, func() bool {
		code, _ := pr.b.admin(t, "/ready")
		return code == http.StatusServiceUnavailable
	}, "ready turns false at once")
	testutil.Eventually(t, 5*time.Second, func() bool {
		_, err := net.DialTimeout("tcp", pr.b.ls.Inbound.Addr().String(), time.Second)
		return err != nil
	}, "the inbound listener stops accepting")

	_, err = io.WriteString(c, opaque("again"))
	require.NoError(t, err)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err, "the open connection still works while draining")
	assert.Equal(t, opaque("again"), string(buf))
	select {
	case <-pr.b.done:
		t.Fatal("the proxy stopped before its connection finished")
	default:
	}
	c.Close()
	select {
	case <-pr.b.done:
		assert.NoError(t, pr.b.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop after its last connection closed")
	}
}

func TestDrainClosesConnectionsLeftAtTheEndOfTheGracePeriod(t *testing.T) {
	pr := startPair(t, pairOptions{cfgB: func(c *dataplane.Config) { c.ShutdownGracePeriod = 300 * time.Millisecond }})
	c, err := net.DialTimeout("tcp", pr.clientAddr, 2*time.Second)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, err = io.WriteString(c, opaque("hold"))
	require.NoError(t, err)
	buf := make([]byte, len(opaque("hold")))
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	start := time.Now()
	pr.b.cancel()
	select {
	case <-pr.b.done:
		assert.NoError(t, pr.b.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the proxy did not stop at the end of its grace period")
	}
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
	_, err = c.Read(buf)
	assert.Error(t, err, "the lingering connection was closed")
}

func TestAdminServesLiveReadyAndMetrics(t *testing.T) {
	pk := newPKI(t)
	pols := &gatedPolicies{gate: make(chan struct{}), inner: dataplane.NewMemoryPolicies()}
	cfg := testConfig()
	cfg.InboundPorts = dataplane.Ports{{First: 8080, Last: 8080}}
	r := startProxy(t, cfg, pk.identity(t, idB), nil, pols, dataplane.Listeners{Inbound: testutil.Listen(t)})
	code, body := r.admin(t, "/live")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "live\n", body)
	code, body = r.admin(t, "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "no policy yet for port 8080")

	pols.inner.Set(8080, defaultServer(t, "all-unauthenticated"))
	close(pols.gate)
	testutil.Eventually(t, 5*time.Second, func() bool {
		code, _ := r.admin(t, "/ready")
		return code == http.StatusOK
	}, "ready once the first policy arrived")
	_, body = r.admin(t, "/metrics")
	for _, name := range []string{"identity_cert_expiration_timestamp_seconds", "process_resident_memory_bytes", "go_goroutines"} {
		assert.Contains(t, body, name)
	}
	code, _ = r.admin(t, "/shutdown")
	assert.Equal(t, http.StatusNotFound, code, "shutdown is off by default")
}

// gatedPolicies answers only once its gate is open, like a policy
// controller that is still starting.
type gatedPolicies struct {
	gate  chan struct{}
	inner *dataplane.MemoryPolicies
}

func (g *gatedPolicies) Watch(ctx context.Context, port uint32) (<-chan *inbound.Server, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.inner.Watch(ctx, port)
}

func TestShutdownEndpointIsPostAndLoopbackOnly(t *testing.T) {
	pk := newPKI(t)
	cfg := testConfig()
	cfg.AdminShutdown = true
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})
	h := r.proxy.AdminHandler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/shutdown", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)

	req := httptest.NewRequest(http.MethodPost, "/shutdown", nil)
	req.RemoteAddr = "10.1.2.3:5555"
	req.Header.Set("X-Forwarded-For", "127.0.0.1")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusForbidden, rec.Code, "a pod-IP client is refused whatever its headers say")

	resp, err := (&http.Client{Timeout: 5 * time.Second}).Post("http://"+r.ls.Admin.Addr().String()+"/shutdown", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusAccepted, resp.StatusCode)
	select {
	case <-r.done:
		assert.NoError(t, r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("shutdown did not stop the proxy")
	}
}

func TestExpiredCertificateMakesTheProxyUnreadyAndStopsMeshTLS(t *testing.T) {
	pk := newPKI(t)
	var now time.Time = time.Now()
	clock := func() time.Time { return now }
	pr := startPair(t, pairOptions{})
	_ = pk
	// A client proxy with its own clock, so that its certificate can expire.
	cfgA := testConfig()
	mapped := testutil.Listen(t)
	a := startProxy(t, cfgA, pr.pki.identity(t, idA), pr.resolver, nil, dataplane.Listeners{
		Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: pr.target}},
	}, dataplane.WithClock(clock))
	code, _ := a.admin(t, "/ready")
	assert.Equal(t, http.StatusOK, code)
	_, err := echoOnce(t, mapped.Addr().String(), opaque("valid"))
	require.NoError(t, err)

	now = now.Add(48 * time.Hour)
	code, body := a.admin(t, "/ready")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "expired")
	_, err = echoOnce(t, mapped.Addr().String(), opaque("expired"))
	assert.Error(t, err, "no mesh TLS with an expired certificate")
}

func TestRotatedCertificatesAreUsedForNewConnections(t *testing.T) {
	pr := startPair(t, pairOptions{})
	id := pr.pki.identity(t, idA)
	mapped := testutil.Listen(t)
	// The connect timeout (1 s by default) covers the mesh handshake, which
	// a machine under a CPU hog with the race detector can take longer
	// for; a failed connect closes the client, which is not what this test
	// is about.
	cfg := testConfig()
	cfg.ConnectTimeout = 30 * time.Second
	startProxy(t, cfg, id, pr.resolver, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: pr.target}}})
	_, err := echoOnce(t, mapped.Addr().String(), opaque("one"))
	require.NoError(t, err)
	fresh := pr.pki.issuer.Leaf(t, testutil.CertOptions{Name: idA, Lifetime: 2 * time.Hour})
	require.NoError(t, id.SetCertificate(fresh.TLS))
	_, err = echoOnce(t, mapped.Addr().String(), opaque("two"))
	require.NoError(t, err)
	assert.Equal(t, fresh.Cert.NotAfter.Unix(), func() int64 { c, _ := id.Certificate(); return c.Leaf.NotAfter.Unix() }())
	assert.Error(t, id.SetCertificate(pr.pki.issuer.Leaf(t, testutil.CertOptions{Name: idC}).TLS), "a certificate for another name is refused")
}

func TestServerTLSConfigRefusesTLS12AndUntrustedClients(t *testing.T) {
	pk := newPKI(t)
	srvID := pk.identity(t, idB)
	ln := testutil.Listen(t)
	errs := make(chan error, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				tc := tls.Server(c, dataplane.ServerTLSConfig(srvID, nil))
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				errs <- tc.Handshake()
				if err := tc.Handshake(); err == nil {
					io.Copy(io.Discard, tc)
				}
				tc.Close()
			}()
		}
	}()
	dial := func(cfg *tls.Config) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		// TLS 1.3 client certificates are checked after the client's
		// handshake returns: the server's verdict shows on the first read.
		c.Write([]byte("x"))
		_, err = c.Read(make([]byte, 1))
		if err == io.EOF {
			return nil
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil
		}
		return err
	}
	// TLS 1.2 only.
	tls12 := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}
	assert.Error(t, dial(tls12))
	<-errs
	// A client certificate from another trust domain.
	other := newPKI(t)
	foreign := other.issuer.Leaf(t, testutil.CertOptions{Name: idA})
	assert.Error(t, dial(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{foreign.TLS}, NextProtos: []string{"weft.transport/1"}}))
	assert.Error(t, <-errs)
	// A client from the mesh.
	good := pk.issuer.Leaf(t, testutil.CertOptions{Name: idA})
	assert.NoError(t, dial(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{good.TLS}}))
	assert.NoError(t, <-errs)
}

func TestProxyRunsOnlyOnceAndNeedsAnIdentity(t *testing.T) {
	_, err := dataplane.New(context.Background(), testConfig(), nil, nil, nil)
	assert.ErrorContains(t, err, "Identity")
	pk := newPKI(t)
	r := startProxy(t, testConfig(), pk.identity(t, idA), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})
	err = r.proxy.Run(context.Background(), dataplane.Listeners{})
	assert.ErrorContains(t, err, "already")
	assert.True(t, strings.HasPrefix(err.Error(), "dataplane: "))
}

// TestNewsContextBoundsTheStartOnly: New fails with the error of a context
// that has already ended (the proxy serves for Run's context, which the
// other tests give it).
func TestNewsContextBoundsTheStartOnly(t *testing.T) {
	pk := newPKI(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dataplane.New(ended, testConfig(), pk.identity(t, idA), nil, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.True(t, strings.HasPrefix(err.Error(), "dataplane: "), err.Error())
}

// TestNewNeedsNoListenerAddressesWhenRunIsGivenListeners: the library's
// caller may open its own sockets; only Listen (and the binary's FromEnv)
// needs addresses, and Run needs a listener that carries traffic.
func TestNewNeedsNoListenerAddressesWhenRunIsGivenListeners(t *testing.T) {
	pk := newPKI(t)
	cfg := testConfig()
	cfg.InboundAddr, cfg.OutboundAddr, cfg.AdminAddr = "", "", ""
	require.NoError(t, cfg.Validate())

	app := startEcho(t, "")
	mapped := testutil.Listen(t)
	startProxy(t, cfg, pk.identity(t, idA), nil, nil, dataplane.Listeners{Mapped: []dataplane.MappedListener{{Listener: mapped, Authority: app.ln.Addr().String()}}})
	got, err := echoOnce(t, mapped.Addr().String(), opaque("through a listener the caller opened"))
	require.NoError(t, err)
	assert.Equal(t, opaque("through a listener the caller opened"), got)

	_, err = dataplane.Listen(context.Background(), cfg)
	assert.ErrorContains(t, err, "no inbound or outbound listener configured", "Listen has nothing to open")

	p, err := dataplane.New(context.Background(), cfg, pk.identity(t, idA), nil, nil)
	require.NoError(t, err)
	err = p.Run(context.Background(), dataplane.Listeners{Admin: testutil.Listen(t)})
	assert.ErrorContains(t, err, "Run needs an inbound, outbound, connect or mapped listener")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.NoError(t, p.Run(ctx, dataplane.Listeners{Inbound: testutil.Listen(t)}), "the refused Run started nothing, so the proxy may still run")
}
