package connmetrics_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	weftutil "github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func noCert() (*tls.Certificate, error) { return nil, errors.New("no certificate yet") }

func newSet(t *testing.T) (*connmetrics.Set, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := connmetrics.New(reg, noCert)
	require.NoError(t, err)
	return s, reg
}

func TestADialedConnectionCountsItsBytesAndItsCleanEnd(t *testing.T) {
	s, reg := newSet(t)
	c, peer := weftutil.TCPPair(t)
	ep := endpoint.Endpoint{
		Addr:         netip.MustParseAddrPort("10.1.2.3:8080"),
		Identity:     "web.ns.serviceaccount.identity.weft.cluster.local",
		MetricLabels: map[string]string{"namespace": "ns", "service": "web", "injected": "ignored"},
	}
	dc := s.Dial(c, connmetrics.OutboundDst("web.ns.svc.cluster.local:8080", ep))
	require.NoError(t, peer.SetDeadline(time.Now().Add(10*time.Second)))
	require.NoError(t, dc.SetDeadline(time.Now().Add(10*time.Second)))

	n, err := dc.Write([]byte("hello"))
	require.NoError(t, err)
	require.Equal(t, 5, n)
	got := make([]byte, 5)
	_, err = io.ReadFull(peer, got)
	require.NoError(t, err)
	_, err = peer.Write([]byte("abc"))
	require.NoError(t, err)
	_, err = io.ReadFull(dc, got[:3])
	require.NoError(t, err)

	labels := `authority="web.ns.svc.cluster.local:8080",direction="outbound",dst_namespace="ns",dst_service="web",peer="dst",server_id="web.ns.serviceaccount.identity.weft.cluster.local",target_addr="10.1.2.3:8080",target_ip="10.1.2.3",target_port="8080",tls="true"`
	open := `
# HELP tcp_open_connections Number of currently open connections.
# TYPE tcp_open_connections gauge
tcp_open_connections{` + labels + `} 1
# HELP tcp_open_total Total count of opened connections.
# TYPE tcp_open_total counter
tcp_open_total{` + labels + `} 1
# HELP tcp_read_bytes_total Total count of bytes read from peers.
# TYPE tcp_read_bytes_total counter
tcp_read_bytes_total{` + labels + `} 3
# HELP tcp_write_bytes_total Total count of bytes written to peers.
# TYPE tcp_write_bytes_total counter
tcp_write_bytes_total{` + labels + `} 5
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(open),
		"tcp_open_connections", "tcp_open_total", "tcp_read_bytes_total", "tcp_write_bytes_total"))
	assert.Empty(t, series(t, reg, "tcp_close_total"), "not closed yet")

	require.NoError(t, dc.Close())
	require.ErrorIs(t, dc.Close(), net.ErrClosed) // and counts nothing more
	closed := `
# HELP tcp_open_connections Number of currently open connections.
# TYPE tcp_open_connections gauge
tcp_open_connections{` + labels + `} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(closed), "tcp_open_connections"))
	assert.Equal(t, []string{`{authority="web.ns.svc.cluster.local:8080",classification="success",direction="outbound",dst_namespace="ns",dst_service="web",errno="",peer="dst",server_id="web.ns.serviceaccount.identity.weft.cluster.local",target_addr="10.1.2.3:8080",target_ip="10.1.2.3",target_port="8080",tls="true"} 1`},
		series(t, reg, "tcp_close_total"))
	assert.Equal(t, c, dc.(interface{ NetConn() net.Conn }).NetConn())
}

func TestAConnectionResetByThePeerIsCountedAsAFailureWithItsErrno(t *testing.T) {
	s, reg := newSet(t)
	c, peer := weftutil.TCPPair(t)
	dc := s.Dial(c, connmetrics.App())
	// A close with unread bytes and no linger sends a reset.
	require.NoError(t, peer.SetLinger(0))
	require.NoError(t, peer.Close())
	require.NoError(t, dc.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := dc.Read(make([]byte, 1))
	require.Error(t, err)
	require.ErrorContains(t, err, "reset", "the peer's reset reaches the reader")
	require.NoError(t, dc.Close())

	const want = `
# HELP tcp_close_total Total count of closed connections.
# TYPE tcp_close_total counter
tcp_close_total{classification="failure",direction="inbound",errno="ECONNRESET",no_tls_reason="loopback",peer="dst",tls="no_identity"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_close_total"))
}

func TestAReadAfterCloseIsNotCountedAsTheConnectionsFailure(t *testing.T) {
	s, reg := newSet(t)
	c, _ := weftutil.TCPPair(t)
	dc := s.Dial(c, connmetrics.App())
	require.NoError(t, dc.Close())
	_, err := dc.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	const want = `
# HELP tcp_close_total Total count of closed connections.
# TYPE tcp_close_total counter
tcp_close_total{classification="success",direction="inbound",errno="",no_tls_reason="loopback",peer="dst",tls="no_identity"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_close_total"))
}

func TestCountedCountsTheBytesOfAnAcceptedConnection(t *testing.T) {
	s, reg := newSet(t)
	c, peer := weftutil.TCPPair(t)
	l := connmetrics.InboundSrc(netip.MustParseAddrPort("10.0.0.9:80"),
		authz.Conn{TLS: true, Identity: "client.ns.serviceaccount.identity.weft.cluster.local"}, nil, 80)
	st := s.Opened(l)
	cc := &connmetrics.Counted{Conn: peer, ReadBytes: st.ReadBytes, WrittenBytes: st.WrittenBytes}
	require.NoError(t, cc.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := c.Write([]byte("0123456789"))
	require.NoError(t, err)
	_, err = io.ReadFull(cc, make([]byte, 10))
	require.NoError(t, err)
	_, err = cc.Write([]byte("ok"))
	require.NoError(t, err)
	st.Closed()
	st.Closed() // counted once

	labels := `client_id="client.ns.serviceaccount.identity.weft.cluster.local",direction="inbound",peer="src",srv_group="",srv_kind="",srv_name="",srv_port="80",target_addr="10.0.0.9:80",target_ip="10.0.0.9",target_port="80",tls="true"`
	assert.Equal(t, []string{`{classification="success",client_id="client.ns.serviceaccount.identity.weft.cluster.local",direction="inbound",errno="",peer="src",srv_group="",srv_kind="",srv_name="",srv_port="80",target_addr="10.0.0.9:80",target_ip="10.0.0.9",target_port="80",tls="true"} 1`},
		series(t, reg, "tcp_close_total"))
	want := `
# HELP tcp_read_bytes_total Total count of bytes read from peers.
# TYPE tcp_read_bytes_total counter
tcp_read_bytes_total{` + labels + `} 10
# HELP tcp_write_bytes_total Total count of bytes written to peers.
# TYPE tcp_write_bytes_total counter
tcp_write_bytes_total{` + labels + `} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_read_bytes_total", "tcp_write_bytes_total"))
}

func TestBothCountsOnTwoSeriesOrOne(t *testing.T) {
	s, reg := newSet(t)
	app := s.Opened(connmetrics.App())
	client := s.Opened(connmetrics.OutboundSrc(netip.AddrPort{}))
	connmetrics.Both{A: app.ReadBytes, B: client.WrittenBytes}.Add(7)
	connmetrics.Both{A: app.ReadBytes}.Add(3)
	const want = `
# HELP tcp_read_bytes_total Total count of bytes read from peers.
# TYPE tcp_read_bytes_total counter
tcp_read_bytes_total{direction="inbound",no_tls_reason="loopback",peer="dst",tls="no_identity"} 10
tcp_read_bytes_total{direction="outbound",no_tls_reason="loopback",peer="src",tls="no_identity"} 0
# HELP tcp_write_bytes_total Total count of bytes written to peers.
# TYPE tcp_write_bytes_total counter
tcp_write_bytes_total{direction="inbound",no_tls_reason="loopback",peer="dst",tls="no_identity"} 0
tcp_write_bytes_total{direction="outbound",no_tls_reason="loopback",peer="src",tls="no_identity"} 7
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_read_bytes_total", "tcp_write_bytes_total"))
}

// series returns the counters of family name as `{labels} value`, labels
// sorted by name as Gather sorts them. (GatherAndCompare reported a
// label-order difference, not a value one, on these tcp_close_total
// series: the store adds a series' own labels, errno and classification,
// after its connection's.)
func series(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l []string
			for _, p := range m.GetLabel() {
				l = append(l, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
			}
			out = append(out, fmt.Sprintf("{%s} %g", strings.Join(l, ","), m.GetCounter().GetValue()))
		}
	}
	return out
}
