package local_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/local"
)

// A local mesh shares loopback: beside a workload listen other pods'
// proxies (their admin servers) and the control plane. These tests put
// a workload's proxy, configured as the local mesh configures it
// (local.ProxyConfig), on 127.0.0.1 beside another proxy's admin server
// and a control-plane metrics server, and send it transport headers as a
// meshed peer would.

const (
	appID  = "api.shop.serviceaccount.identity.weft.cluster.local"
	peerID = "web.shop.serviceaccount.identity.weft.cluster.local"
)

type sharedLoopback struct {
	anchor, issuer *testutil.CA
	inbound        net.Listener
	admin          net.Listener // the workload proxy's
	appPort        uint16
	otherAdmin     uint16 // another proxy's admin server
	cpMetrics      uint16 // a control-plane metrics server
}

// runProxy starts a proxy with cfg on ls for identity name and returns
// once it runs.
func runProxy(t *testing.T, s *sharedLoopback, name string, cfg dataplane.Config, pols dataplane.InboundPolicies, ls dataplane.Listeners) {
	t.Helper()
	leaf := s.issuer.Leaf(t, testutil.CertOptions{Name: name})
	id, err := dataplane.NewStaticIdentity(name, leaf.TLS, testutil.Pool(s.anchor))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := dataplane.New(ctx, cfg, id, nil, pols)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx, ls)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	testutil.Eventually(t, 10*time.Second, func() bool {
		err := p.Ready()
		return err == nil || !strings.Contains(err.Error(), "not running")
	}, "proxy running")
}

func startSharedLoopback(t *testing.T) *sharedLoopback {
	s := &sharedLoopback{}
	s.anchor = testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.cluster.local"})
	s.issuer = s.anchor.Issuer(t, testutil.CertOptions{Name: "identity.weft.cluster.local"})
	portOf := func(l net.Listener) uint16 { return uint16(l.Addr().(*net.TCPAddr).Port) }
	serve := func(h http.HandlerFunc) uint16 {
		l := testutil.Listen(t)
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return portOf(l)
	}

	// The workload's program, on its one port.
	s.appPort = serve(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "app\n") })
	// A control-plane metrics server.
	s.cpMetrics = serve(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "identity_certify_total 1\n") })

	// Another pod's proxy: only its admin server matters here.
	otherIn, otherAdmin := testutil.Listen(t), testutil.Listen(t)
	other := dataplane.DefaultConfig()
	other.InboundAddr, other.OutboundAddr, other.AdminAddr = otherIn.Addr().String(), "", otherAdmin.Addr().String()
	runProxy(t, s, "other.shop.serviceaccount.identity.weft.cluster.local", other, nil, dataplane.Listeners{Inbound: otherIn, Admin: otherAdmin})
	s.otherAdmin = portOf(otherAdmin)

	// The workload's proxy, as the local mesh configures it.
	s.inbound, s.admin = testutil.Listen(t), testutil.Listen(t)
	ip := netip.MustParseAddr("127.0.0.1")
	pod := local.Pod{
		Workload: "api", Namespace: "shop", Name: "api-0", ServiceAccount: "api", Identity: appID, IP: ip,
		Ports:   []local.Port{{Name: "http", Port: int(s.appPort)}},
		Inbound: netip.AddrPortFrom(ip, portOf(s.inbound)), Admin: netip.AddrPortFrom(ip, portOf(s.admin)),
	}
	cfg, _ := local.ProxyConfig(pod, local.ControlPlane{}, nil, "", "all-unauthenticated")
	cfg.TapIdentities = nil // no tap listener in this test
	// Every port's policy admits anyone: what stops a peer is the port,
	// not the policy.
	open, err := dataplane.DefaultInboundServer(dataplane.AllUnauthenticated, nil)
	require.NoError(t, err)
	pols := dataplane.NewMemoryPolicies()
	for _, port := range []uint16{s.appPort, s.otherAdmin, s.cpMetrics} {
		pols.Set(uint32(port), open)
	}
	runProxy(t, s, appID, cfg, pols, dataplane.Listeners{Inbound: s.inbound, Admin: s.admin})
	return s
}

// get sends a transport header naming port from the meshed peer, then an
// HTTP/1 GET; it returns the response status and body, or an error when
// the proxy closed the connection instead.
func (s *sharedLoopback) get(t *testing.T, port uint16, path string) (int, string, error) {
	t.Helper()
	leaf := s.issuer.Leaf(t, testutil.CertOptions{Name: peerID})
	cfg := &tls.Config{RootCAs: testutil.Pool(s.anchor), ServerName: appID, MinVersion: tls.VersionTLS13,
		NextProtos: []string{transport.ALPN}, Certificates: []tls.Certificate{leaf.TLS}}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", s.inbound.Addr().String(), cfg)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second)) // a hang guard only
	hdr, err := transport.Header{Port: port, Protocol: transport.HTTP1}.Append(nil)
	require.NoError(t, err)
	if _, err := c.Write(hdr); err != nil {
		return 0, "", err
	}
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// refused reads the workload proxy's count of inbound connections
// refused for reason.
func (s *sharedLoopback) refused(t *testing.T, reason string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.admin.Addr().String() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "tcp_refused_total{") && strings.Contains(line, `direction="inbound"`) &&
			strings.Contains(line, `reason="`+reason+`"`) {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

func TestALocalMeshPeerReachesOnlyTheWorkloadsOwnPorts(t *testing.T) {
	// Finding 7 of issue 27: where loopback is shared, a peer's transport
	// header reached another proxy's admin server and the identity
	// controller's metrics.
	s := startSharedLoopback(t)

	status, body, err := s.get(t, s.appPort, "/")
	require.NoError(t, err, "the workload's own port is served")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "app\n", body)

	for _, target := range []struct {
		name string
		port uint16
	}{{"another proxy's admin server", s.otherAdmin}, {"a control-plane metrics server", s.cpMetrics}} {
		t.Run(target.name, func(t *testing.T) {
			status, body, err := s.get(t, target.port, "/metrics")
			assert.Error(t, err, "refused, not forwarded: got %d and %d bytes", status, len(body))
		})
	}
	assert.Equal(t, 2.0, s.refused(t, "not-app-port"), "each refusal is counted with its reason")
}
