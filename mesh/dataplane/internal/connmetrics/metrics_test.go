package connmetrics_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func TestRefusalsAreCountedByDirectionAndReason(t *testing.T) {
	s, reg := newSet(t)
	s.Refuse("inbound", "not-http")
	s.Refuse("inbound", "not-http")
	s.Refuse("tap", "handshake")
	const want = `
# HELP tcp_refused_total Connections refused before any policy applied, by direction (inbound, outbound, admin, tap) and reason (a fixed set).
# TYPE tcp_refused_total counter
tcp_refused_total{direction="inbound",reason="not-http"} 2
tcp_refused_total{direction="tap",reason="handshake"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_refused_total"))
}

func TestTCPAuthorizationsAreCountedAsAllowedOrDenied(t *testing.T) {
	s, reg := newSet(t)
	l := connmetrics.InboundSrc(netip.MustParseAddrPort("10.0.0.9:5432"), authz.Conn{}, nil, 5432)
	s.AuthzTCP(l, true)
	s.AuthzTCP(l, false)
	s.AuthzTCP(l, false)
	labels := `direction="inbound",no_tls_reason="no_tls_from_remote",peer="src",srv_group="",srv_kind="",srv_name="",srv_port="5432",target_addr="10.0.0.9:5432",target_ip="10.0.0.9",target_port="5432",tls="no_identity"`
	want := `
# HELP inbound_tcp_authz_allow_total The total number of inbound TCP connections that were authorized.
# TYPE inbound_tcp_authz_allow_total counter
inbound_tcp_authz_allow_total{` + labels + `} 1
# HELP inbound_tcp_authz_deny_total The total number of inbound TCP connections that were denied.
# TYPE inbound_tcp_authz_deny_total counter
inbound_tcp_authz_deny_total{` + labels + `} 2
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "inbound_tcp_authz_allow_total", "inbound_tcp_authz_deny_total"))
}

func TestTheCertificateExpiryIsReadAtEachScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	var cert *tls.Certificate
	certErr := errors.New("no certificate yet")
	_, err := connmetrics.New(reg, func() (*tls.Certificate, error) { return cert, certErr })
	require.NoError(t, err)
	expiry := func() string {
		return `
# HELP identity_cert_expiration_timestamp_seconds Unix time at which the proxy's current certificate expires (0 without one).
# TYPE identity_cert_expiration_timestamp_seconds gauge
identity_cert_expiration_timestamp_seconds `
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expiry()+"0\n"), "identity_cert_expiration_timestamp_seconds"))

	cert, certErr = &tls.Certificate{}, nil // no leaf
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expiry()+"0\n"), "identity_cert_expiration_timestamp_seconds"))

	notAfter := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	cert = &tls.Certificate{Leaf: &x509.Certificate{NotAfter: notAfter}}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(expiry()+fmt.Sprintf("%d\n", notAfter.Unix())), "identity_cert_expiration_timestamp_seconds"))
}

func TestASecondSetOnTheSameRegistryIsRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := connmetrics.New(reg, noCert)
	require.NoError(t, err)
	_, err = connmetrics.New(reg, noCert)
	var are prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &are)
}

func TestAnErrnoOutsideTheKnownSetIsLabelledEOTHER(t *testing.T) {
	s, reg := newSet(t)
	for _, err := range []error{
		fmt.Errorf("read: %w", syscall.EPIPE),
		fmt.Errorf("read: %w", syscall.EIO),
		errors.New("not an errno"),
	} {
		c := s.Opened(connmetrics.App())
		c.Fail(err)
		c.Fail(syscall.ECONNRESET) // the first error wins
		c.Fail(nil)
		c.Closed()
	}
	const want = `
# HELP tcp_close_total Total count of closed connections.
# TYPE tcp_close_total counter
tcp_close_total{classification="failure",direction="inbound",errno="",no_tls_reason="loopback",peer="dst",tls="no_identity"} 1
tcp_close_total{classification="failure",direction="inbound",errno="EOTHER",no_tls_reason="loopback",peer="dst",tls="no_identity"} 1
tcp_close_total{classification="failure",direction="inbound",errno="EPIPE",no_tls_reason="loopback",peer="dst",tls="no_identity"} 1
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "tcp_close_total"))
}
