package dataplane

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
)

// Label values of the direction label.
const (
	Inbound  = "inbound"
	Outbound = "outbound"
)

// Values of the peer label of transport metrics: the connection the proxy
// accepted (src) or the one it opened (dst).
const (
	peerSrc = "src"
	peerDst = "dst"
)

// metrics are the proxy's Prometheus series: the Linkerd-named families
// in a store (internal/metricstore) and Weft's extras as client_golang
// vectors.
type metrics struct {
	st *metricstore.Store

	tcpOpen, tcpClose, tcpOpenConns, tcpRead, tcpWrite, tcpDuration *metricstore.Family
	tcpAuthzAllow, tcpAuthzDeny                                     *metricstore.Family
	tcpRouteOpen, tcpRouteClose, tlsRouteOpen, tlsRouteClose        *metricstore.Family // outbound_stream.go

	refused       *prometheus.CounterVec // tcp_refused_total
	policyRefused prometheus.Counter
	http          *reqmetrics.HTTP
}

func newMetrics(reg prometheus.Registerer, id Identity, now func() time.Time) (*metrics, error) {
	overflow := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metrics_label_sets_overflow_total",
		Help: "Label sets folded into the overflow series because the proxy holds the most it keeps.",
	})
	m := &metrics{
		st:           metricstore.NewStore(overflow),
		tcpOpen:      metricstore.NewFamily("tcp_open_total", "Total count of opened connections.", metricstore.Counter),
		tcpClose:     metricstore.NewFamily("tcp_close_total", "Total count of closed connections.", metricstore.Counter),
		tcpOpenConns: metricstore.NewFamily("tcp_open_connections", "Number of currently open connections.", metricstore.Gauge),
		tcpRead:      metricstore.NewFamily("tcp_read_bytes_total", "Total count of bytes read from peers.", metricstore.Counter),
		tcpWrite:     metricstore.NewFamily("tcp_write_bytes_total", "Total count of bytes written to peers.", metricstore.Counter),
		tcpDuration:  metricstore.NewFamily("tcp_connection_duration_ms", "Connection lifetimes, in milliseconds.", metricstore.Histogram),
		tcpAuthzAllow: metricstore.NewFamily("inbound_tcp_authz_allow_total",
			"The total number of inbound TCP connections that were authorized.", metricstore.Counter),
		tcpAuthzDeny: metricstore.NewFamily("inbound_tcp_authz_deny_total",
			"The total number of inbound TCP connections that were denied.", metricstore.Counter),
		tcpRouteOpen:  metricstore.NewFamily("outbound_tcp_route_open_total", "Outbound connections a TCP or built-in opaque route took.", metricstore.Counter),
		tcpRouteClose: metricstore.NewFamily("outbound_tcp_route_close_total", "Outbound connections on a TCP or built-in opaque route that ended, by error (empty when relayed).", metricstore.Counter),
		tlsRouteOpen:  metricstore.NewFamily("outbound_tls_route_open_total", "Outbound connections a TLS route took.", metricstore.Counter),
		tlsRouteClose: metricstore.NewFamily("outbound_tls_route_close_total", "Outbound connections on a TLS route that ended, by error (empty when relayed).", metricstore.Counter),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tcp_refused_total",
		Help: "Connections refused before any policy applied, by direction (inbound, outbound, admin, tap) and reason (a fixed set).",
	}, []string{"direction", "reason"})
	expiry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "identity_cert_expiration_timestamp_seconds",
		Help: "Unix time at which the proxy's current certificate expires (0 without one).",
	}, func() float64 {
		c, err := id.Certificate()
		if err != nil || c == nil || c.Leaf == nil {
			return 0
		}
		return float64(c.Leaf.NotAfter.Unix())
	})
	m.policyRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "inbound_policy_refused_total", Help: "Inbound policy updates refused because the evaluator could not fully read them.",
	})
	m.http = reqmetrics.New(m.st)
	cs := []prometheus.Collector{m.st, overflow, m.refused, expiry, m.policyRefused}
	for _, c := range append(cs, m.http.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// registerRuntime adds the Go and process collectors (memory, CPU, file
// descriptors) to a registry the proxy created itself.
func registerRuntime(reg prometheus.Registerer) {
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// connStats are the series of one connection, resolved when it opens.
type connStats struct {
	m          *metrics
	g          *metricstore.Group
	read, wrt  *metricstore.Series
	openConns  *metricstore.Series
	start      time.Time
	failure    atomic.Pointer[error]
	closedOnce atomic.Bool
}

// opened counts a connection with the transport labels l (see
// metrics_conn.go and internal/metricstore for how they are built) and returns its series. The
// caller must call closed exactly once.
func (m *metrics) opened(l *metricstore.Labels) *connStats {
	g := m.st.Group(l)
	g.Pin()
	s := &connStats{m: m, g: g, start: time.Now()}
	g.Series(m.tcpOpen, nil).Inc()
	s.openConns = g.Series(m.tcpOpenConns, nil)
	s.openConns.GaugeAdd(1)
	s.read = g.Series(m.tcpRead, nil)
	s.wrt = g.Series(m.tcpWrite, nil)
	return s
}

// fail records why the connection ended badly (the first error wins).
func (s *connStats) Fail(err error) {
	if err != nil {
		s.failure.CompareAndSwap(nil, &err)
	}
}

// closed records the end of the connection: tcp_close_total and
// tcp_connection_duration_ms with errno and classification.
func (s *connStats) closed() {
	if s.closedOnce.Swap(true) {
		return
	}
	now := time.Now()
	var failure error
	if e := s.failure.Load(); e != nil {
		failure = *e
	}
	extra := (&metricstore.Labels{}).Add("errno", errnoLabel(failure)).Add("classification", metricstore.Classification(failure != nil))
	s.g.Series(s.m.tcpClose, extra).Inc()
	s.g.Series(s.m.tcpDuration, extra).Observe(now.Sub(s.start))
	s.openConns.GaugeAdd(-1)
	s.g.Touch(now)
	s.g.Unpin()
}

// errnoLabel names the operating-system error that ended a connection
// ("ECONNRESET"), empty for a clean end or an error of another kind.
func errnoLabel(err error) string {
	var errno syscall.Errno
	if err == nil || !errors.As(err, &errno) {
		return ""
	}
	if n := errnoNames[errno]; n != "" {
		return n
	}
	return "EOTHER"
}

var errnoNames = map[syscall.Errno]string{
	syscall.ECONNRESET:    "ECONNRESET",
	syscall.ECONNREFUSED:  "ECONNREFUSED",
	syscall.ECONNABORTED:  "ECONNABORTED",
	syscall.ETIMEDOUT:     "ETIMEDOUT",
	syscall.EPIPE:         "EPIPE",
	syscall.EHOSTUNREACH:  "EHOSTUNREACH",
	syscall.ENETUNREACH:   "ENETUNREACH",
	syscall.ENETDOWN:      "ENETDOWN",
	syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
}

// both counts bytes on two series at once (a relay.Counter): the bytes
// one connection reads are the bytes the other writes.
type both struct{ a, b *metricstore.Series }

func (c both) Add(v float64) {
	n := uint64(v)
	c.a.AddN(n)
	if c.b != nil {
		c.b.AddN(n)
	}
}

// authzTCP counts an inbound connection's authorization:
// inbound_tcp_authz_allow_total or inbound_tcp_authz_deny_total, with the
// labels l (target, server, authorization and TLS labels).
func (m *metrics) authzTCP(l *metricstore.Labels, allowed bool) {
	f := m.tcpAuthzDeny
	if allowed {
		f = m.tcpAuthzAllow
	}
	m.st.Group(l).Series(f, nil).Inc()
}

// refuse counts a connection refused for reason (one of the refuse*
// constants, so the label stays bounded).
func (m *metrics) refuse(direction, reason string) {
	m.refused.WithLabelValues(direction, reason).Inc()
}
