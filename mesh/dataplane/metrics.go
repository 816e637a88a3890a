package dataplane

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Label values of the direction label.
const (
	Inbound  = "inbound"
	Outbound = "outbound"
)

// metrics are the proxy's Prometheus series. Per-connection children are
// bound once when a connection opens; the copy loops only add to counters.
type metrics struct {
	open, close        *prometheus.CounterVec
	openConns          *prometheus.GaugeVec
	readBytes, written *prometheus.CounterVec
	allow, deny        *prometheus.CounterVec
	refused            *prometheus.CounterVec
	policyRefused      prometheus.Counter
	http               *httpMetrics
}

var connLabels = []string{"direction", "peer_id", "tls"}

func newMetrics(reg prometheus.Registerer, id Identity, now func() time.Time) (*metrics, error) {
	m := &metrics{
		open: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tcp_open_total", Help: "TCP connections opened, by direction, peer identity and mesh TLS.",
		}, connLabels),
		close: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tcp_close_total", Help: "TCP connections closed.",
		}, connLabels),
		openConns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tcp_open_connections", Help: "TCP connections currently open.",
		}, connLabels),
		readBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tcp_read_bytes_total", Help: "Bytes read from the client side of proxied connections.",
		}, connLabels),
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tcp_write_bytes_total", Help: "Bytes written to the client side of proxied connections.",
		}, connLabels),
		allow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbound_tcp_authz_allow_total", Help: "Inbound connections allowed, by target port, authorization, peer identity and mesh TLS.",
		}, []string{"target_port", "authz", "peer_id", "tls"}),
		deny: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbound_tcp_authz_deny_total", Help: "Inbound connections denied, by target port, peer identity and mesh TLS.",
		}, []string{"target_port", "peer_id", "tls"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tcp_refused_total",
		Help: "Connections refused before any policy applied, by direction (inbound, outbound, admin) and reason (a fixed set).",
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
	m.http = newHTTPMetrics()
	cs := []prometheus.Collector{m.open, m.close, m.openConns, m.readBytes, m.written, m.allow, m.deny, m.refused, expiry, m.policyRefused}
	for _, c := range append(cs, m.http.collectors()...) {
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

// connStats are the bound series of one connection.
type connStats struct {
	labels    [3]string
	m         *metrics
	read, wrt prometheus.Counter
}

func tlsLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func (m *metrics) opened(direction, peer string, tls bool) *connStats {
	s := &connStats{labels: [3]string{direction, peer, tlsLabel(tls)}, m: m}
	s.read = m.readBytes.WithLabelValues(s.labels[:]...)
	s.wrt = m.written.WithLabelValues(s.labels[:]...)
	m.open.WithLabelValues(s.labels[:]...).Inc()
	m.openConns.WithLabelValues(s.labels[:]...).Inc()
	return s
}

func (s *connStats) closed() {
	s.m.close.WithLabelValues(s.labels[:]...).Inc()
	s.m.openConns.WithLabelValues(s.labels[:]...).Dec()
}

func (m *metrics) authz(port uint16, allowed bool, name, peer string, tls bool) {
	p := strconv.Itoa(int(port))
	if allowed {
		m.allow.WithLabelValues(p, name, peer, tlsLabel(tls)).Inc()
	} else {
		m.deny.WithLabelValues(p, peer, tlsLabel(tls)).Inc()
	}
}

// refuse counts a connection refused for reason (one of the refuse*
// constants, so the label stays bounded).
func (m *metrics) refuse(direction, reason string) {
	m.refused.WithLabelValues(direction, reason).Inc()
}
