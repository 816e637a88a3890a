package dataplane

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the request-level series. Label values come from
// discovery (the target authority), policy (route and authorization
// names), verified certificates (peer_id) and a fixed set of status codes
// and reason classes: never from a raw Host, path or header, so a client
// cannot grow them (Linkerd CVE-2025-43915). Targets are additionally
// capped: past maxTargetLabels distinct values, new ones count as
// "overflow".
type httpMetrics struct {
	requests   *prometheus.CounterVec
	responses  *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	authzAllow *prometheus.CounterVec
	authzDeny  *prometheus.CounterVec
	authzAudit *prometheus.CounterVec
	retries    *prometheus.CounterVec
	exhausted  *prometheus.CounterVec
	errors     *prometheus.CounterVec
	protocol   *prometheus.CounterVec

	targets labelBudget
}

// maxTargetLabels bounds the distinct target label values.
const maxTargetLabels = 500

// latencyBuckets are Linkerd's response_latency_ms buckets.
var latencyBuckets = []float64{1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500,
	1000, 2000, 3000, 4000, 5000, 10000, 20000, 30000, 40000, 50000}

var reqLabels = []string{"direction", "target", "route", "peer_id", "tls"}

func newHTTPMetrics() *httpMetrics {
	return &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "request_total", Help: "HTTP requests received, by direction, target, route, peer identity and mesh TLS.",
		}, reqLabels),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "response_total", Help: "HTTP responses completed, with status code and classification (success or failure).",
		}, append(append([]string{}, reqLabels...), "status_code", "classification")),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "response_latency_ms", Help: "Time from a request's head to its response's head, in milliseconds.",
			Buckets: latencyBuckets,
		}, []string{"direction", "target", "route", "classification"}),
		authzAllow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbound_http_authz_allow_total", Help: "Inbound HTTP requests allowed, by target port, route, authorization, peer identity and mesh TLS.",
		}, []string{"target_port", "route", "authz", "peer_id", "tls"}),
		authzDeny: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbound_http_authz_deny_total", Help: "Inbound HTTP requests denied, by target port, route, reason class, peer identity and mesh TLS.",
		}, []string{"target_port", "route", "reason", "peer_id", "tls"}),
		authzAudit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inbound_http_authz_audit_total", Help: "Inbound HTTP requests only an audit policy admitted (let through and reported).",
		}, []string{"target_port", "route", "peer_id", "tls"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_http_retries_total", Help: "Outbound HTTP retries, by target, route and reason (status, error, timeout).",
		}, []string{"target", "route", "reason"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_http_retry_budget_exhausted_total", Help: "Retries skipped because the retry budget was spent.",
		}, []string{"target", "route"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_errors_total", Help: "Requests the proxy answered itself, by direction, target and reason class.",
		}, []string{"direction", "target", "reason"}),
		protocol: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_protocol_errors_total", Help: "HTTP connections or requests refused for protocol violations, by direction and reason class.",
		}, []string{"direction", "reason"}),
	}
}

func (h *httpMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.requests, h.responses, h.latency, h.authzAllow, h.authzDeny, h.authzAudit,
		h.retries, h.exhausted, h.errors, h.protocol}
}

// labelBudget admits the first max distinct values of a label.
type labelBudget struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (b *labelBudget) admit(v string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= maxTargetLabels {
		return "overflow"
	}
	b.seen[v] = true
	return v
}

// statusLabel renders a status code; anything outside 100..599 is "other".
func statusLabel(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code)
}

func classLabel(failure bool) string {
	if failure {
		return "failure"
	}
	return "success"
}

// reqStats are the bound labels of one request.
type reqStats struct {
	h      *httpMetrics
	labels [5]string
	start  time.Time
}

func (h *httpMetrics) request(direction, target, route, peer string, tls bool) *reqStats {
	s := &reqStats{h: h, labels: [5]string{direction, target, route, peer, tlsLabel(tls)}, start: time.Now()}
	h.requests.WithLabelValues(s.labels[:]...).Inc()
	return s
}

// head records the latency to the response head.
func (s *reqStats) head(failure bool) {
	ms := float64(time.Since(s.start)) / float64(time.Millisecond)
	s.h.latency.WithLabelValues(s.labels[0], s.labels[1], s.labels[2], classLabel(failure)).Observe(ms)
}

// done records the completed response.
func (s *reqStats) done(code int, failure bool) {
	s.h.responses.WithLabelValues(s.labels[0], s.labels[1], s.labels[2], s.labels[3], s.labels[4], statusLabel(code), classLabel(failure)).Inc()
}
