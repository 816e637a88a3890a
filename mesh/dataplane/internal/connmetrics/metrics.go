package connmetrics

import (
	"crypto/tls"
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
)

// Values of the direction label (the dataplane package's Inbound and
// Outbound are these).
const (
	Inbound  = "inbound"
	Outbound = "outbound"
)

// Values of the peer label of transport metrics: the connection the
// proxy accepted (src) or the one it opened (dst).
const (
	peerSrc = "src"
	peerDst = "dst"
)

// Set is the proxy's Prometheus series: the Linkerd-named families in a
// store (internal/metricstore) and Weft's extras as client_golang
// vectors. The families of the outbound TCP and TLS routes are read by
// the connection paths (internal/l4), which count route connections
// themselves.
type Set struct {
	Store *metricstore.Store
	// HTTP are the request series (internal/reqmetrics), in Store.
	HTTP *reqmetrics.HTTP
	// PolicyRefused counts inbound policy updates refused because the
	// evaluator could not fully read them.
	PolicyRefused prometheus.Counter

	TCPRouteOpen, TCPRouteClose, TLSRouteOpen, TLSRouteClose *metricstore.Family

	tcpOpen, tcpClose, tcpOpenConns, tcpRead, tcpWrite, tcpDuration *metricstore.Family
	tcpAuthzAllow, tcpAuthzDeny                                     *metricstore.Family

	refused *prometheus.CounterVec // tcp_refused_total
}

// New builds the proxy's series and registers them with reg. certificate
// is the proxy's current certificate, read at each scrape for
// identity_cert_expiration_timestamp_seconds (0 while it errors or has
// no leaf). It fails when reg refuses a collector (a name registered
// twice).
func New(reg prometheus.Registerer, certificate func() (*tls.Certificate, error)) (*Set, error) {
	overflow := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "metrics_label_sets_overflow_total",
		Help: "Label sets folded into the overflow series because the proxy holds the most it keeps.",
	})
	m := &Set{
		Store:        metricstore.NewStore(overflow),
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
		TCPRouteOpen:  metricstore.NewFamily("outbound_tcp_route_open_total", "Outbound connections a TCP or built-in opaque route took.", metricstore.Counter),
		TCPRouteClose: metricstore.NewFamily("outbound_tcp_route_close_total", "Outbound connections on a TCP or built-in opaque route that ended, by error (empty when relayed).", metricstore.Counter),
		TLSRouteOpen:  metricstore.NewFamily("outbound_tls_route_open_total", "Outbound connections a TLS route took.", metricstore.Counter),
		TLSRouteClose: metricstore.NewFamily("outbound_tls_route_close_total", "Outbound connections on a TLS route that ended, by error (empty when relayed).", metricstore.Counter),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tcp_refused_total",
		Help: "Connections refused before any policy applied, by direction (inbound, outbound, admin, tap) and reason (a fixed set).",
	}, []string{"direction", "reason"})
	expiry := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "identity_cert_expiration_timestamp_seconds",
		Help: "Unix time at which the proxy's current certificate expires (0 without one).",
	}, func() float64 {
		c, err := certificate()
		if err != nil || c == nil || c.Leaf == nil {
			return 0
		}
		return float64(c.Leaf.NotAfter.Unix())
	})
	m.PolicyRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "inbound_policy_refused_total", Help: "Inbound policy updates refused because the evaluator could not fully read them.",
	})
	m.HTTP = reqmetrics.New(m.Store)
	cs := []prometheus.Collector{m.Store, overflow, m.refused, expiry, m.PolicyRefused}
	for _, c := range append(cs, m.HTTP.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// RegisterRuntime adds the Go and process collectors (memory, CPU, file
// descriptors) to a registry the proxy created itself.
func RegisterRuntime(reg prometheus.Registerer) {
	_ = reg.Register(collectors.NewGoCollector())
	_ = reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}

// Conn is the series of one connection, resolved when it opens (Opened).
// ReadBytes and WrittenBytes count its bytes; a relay.Pipe records its error with
// Fail. The zero Conn with both series set counts bytes into series no
// store holds (tests of the relay's wiring).
type Conn struct {
	ReadBytes, WrittenBytes *metricstore.Series

	m          *Set
	g          *metricstore.Group
	openConns  *metricstore.Series
	start      time.Time
	failure    atomic.Pointer[error]
	closedOnce atomic.Bool
}

// Opened counts a connection with the transport labels l (InboundSrc,
// App, OutboundSrc, OutboundDst) and returns its series. The caller must
// call Closed exactly once.
func (m *Set) Opened(l *metricstore.Labels) *Conn {
	g := m.Store.Group(l)
	g.Pin()
	s := &Conn{m: m, g: g, start: time.Now()}
	g.Series(m.tcpOpen, nil).Inc()
	s.openConns = g.Series(m.tcpOpenConns, nil)
	s.openConns.GaugeAdd(1)
	s.ReadBytes = g.Series(m.tcpRead, nil)
	s.WrittenBytes = g.Series(m.tcpWrite, nil)
	return s
}

// Fail records why the connection ended badly (the first error wins).
func (s *Conn) Fail(err error) {
	if err != nil {
		s.failure.CompareAndSwap(nil, &err)
	}
}

// Closed records the end of the connection: tcp_close_total and
// tcp_connection_duration_ms with errno and classification. Calls after
// the first count nothing.
func (s *Conn) Closed() {
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

// Both counts bytes on two series at once (a relay.Counter): the bytes
// one connection reads are the bytes the other writes. B may be nil.
type Both struct{ A, B *metricstore.Series }

// Add counts v bytes on A and, when set, B.
func (c Both) Add(v float64) {
	n := uint64(v)
	c.A.AddN(n)
	if c.B != nil {
		c.B.AddN(n)
	}
}

// AuthzTCP counts an inbound connection's authorization:
// inbound_tcp_authz_allow_total or inbound_tcp_authz_deny_total, with the
// labels l (target, server, authorization and TLS labels).
func (m *Set) AuthzTCP(l *metricstore.Labels, allowed bool) {
	f := m.tcpAuthzDeny
	if allowed {
		f = m.tcpAuthzAllow
	}
	m.Store.Group(l).Series(f, nil).Inc()
}

// Refuse counts a connection refused for reason in tcp_refused_total.
// The caller passes one of a fixed set of reasons and directions, so the
// labels stay bounded.
func (m *Set) Refuse(direction, reason string) {
	m.refused.WithLabelValues(direction, reason).Inc()
}
