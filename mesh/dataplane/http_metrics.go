package dataplane

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// httpMetrics are the request-level series: Linkerd's endpoint-level
// families (request_total, response_total, response_latency_ms), route-level
// families (route_*) and inbound authorization counters in the store, and
// Weft's extras as client_golang vectors. Label values come from discovery,
// policy, verified certificates and fixed enumerations, never from a raw
// Host, path or header (Linkerd CVE-2025-43915). Authorities are
// additionally capped: past maxTargetLabels distinct values, new ones count
// as "overflow".
type httpMetrics struct {
	st *metricstore.Store

	ep, route reqFamilies

	authzAllow, authzDeny, authzAudit, routeNotFound *metricstore.Family

	retries   *prometheus.CounterVec
	exhausted *prometheus.CounterVec
	errors    *prometheus.CounterVec
	protocol  *prometheus.CounterVec

	targets    labelBudget // outbound authorities
	inboundDst labelBudget // inbound: Services named by peer proxies that discovery knows
}

// reqFamilies are the families of one level (endpoint or route).
type reqFamilies struct {
	requests, responses, latency *metricstore.Family
	retryable                    *metricstore.Family // route level only
}

// maxTargetLabels bounds the distinct authority label values.
const maxTargetLabels = 500

func newHTTPMetrics(st *metricstore.Store) *httpMetrics {
	return &httpMetrics{
		st: st,
		ep: reqFamilies{
			requests:  metricstore.NewFamily("request_total", "Total count of HTTP requests.", metricstore.Counter),
			responses: metricstore.NewFamily("response_total", "Total count of HTTP responses.", metricstore.Counter),
			latency: metricstore.NewFamily("response_latency_ms",
				"Elapsed times between a request's headers being received and its response's headers being sent, in milliseconds.", metricstore.Histogram),
		},
		route: reqFamilies{
			requests:  metricstore.NewFamily("route_request_total", "Total count of HTTP requests, by route.", metricstore.Counter),
			responses: metricstore.NewFamily("route_response_total", "Total count of HTTP responses, by route.", metricstore.Counter),
			latency: metricstore.NewFamily("route_response_latency_ms",
				"Elapsed times between a request's headers being received and its response's headers being sent, by route, in milliseconds.", metricstore.Histogram),
			retryable: metricstore.NewFamily("route_retryable_total", "Total count of retryable HTTP responses, by route.", metricstore.Counter),
		},
		authzAllow: metricstore.NewFamily("inbound_http_authz_allow_total",
			"The total number of inbound HTTP requests that were authorized.", metricstore.Counter),
		authzDeny: metricstore.NewFamily("inbound_http_authz_deny_total",
			"The total number of inbound HTTP requests that were denied by authorization policy.", metricstore.Counter),
		authzAudit: metricstore.NewFamily("inbound_http_authz_audit_total",
			"Inbound HTTP requests only an audit policy admitted (let through and reported).", metricstore.Counter),
		routeNotFound: metricstore.NewFamily("inbound_http_route_not_found_total",
			"The total number of inbound HTTP requests that could not be associated with a route.", metricstore.Counter),
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
	return []prometheus.Collector{h.retries, h.exhausted, h.errors, h.protocol}
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
	v = metricstore.LabelValue(v)
	b.seen[v] = true
	return v
}

// cowMap is a map the data path reads without a lock and that is written
// by copying, for caches that change rarely. Past max entries it starts
// over (the entries are re-resolved from the store, which deduplicates).
type cowMap[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

func (c *cowMap[K, V]) load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

func (c *cowMap[K, V]) store(k K, v V, max int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var nm map[K]V
	if old := c.m.Load(); old != nil && len(*old) < max {
		nm = make(map[K]V, len(*old)+1)
		for kk, vv := range *old {
			nm[kk] = vv
		}
	} else {
		nm = map[K]V{}
	}
	nm[k] = v
	c.m.Store(&nm)
}

// maxCacheEntries bounds each per-service and per-port series cache.
const maxCacheEntries = 4096

// reqSeries are the series of one request label set at one level: the
// request counter, latency histograms by status and response counters by
// outcome, the last two resolved on first use and cached.
type reqSeries struct {
	g        *metricstore.Group
	fam      *reqFamilies
	requests *metricstore.Series
	lat      cowMap[uint16, *metricstore.Series]
	rsp      cowMap[respKey, *metricstore.Series]
	// tls is the tls label of an endpoint-level series ("true" or
	// "no_identity"; empty when no connection carried the request): the
	// route-level response of a request gets the tls of the endpoint
	// series that answered it.
	tls string
	retrySeries
}

// tlsValue is the tls label of a request that went over mutual TLS or not.
func tlsValue(mtls bool) string {
	if mtls {
		return "true"
	}
	return "no_identity"
}

// respKey is the outcome labels of response_total.
type respKey struct {
	status  uint16 // 0: none
	grpc    int16  // -1: not gRPC
	failure bool
	err     string // error class when the response failed mid-way, or the proxy answered itself
	tls     string // route level only: the tls label of the endpoint that answered
}

func (h *httpMetrics) reqSeries(fam *reqFamilies, base *metricstore.Labels) *reqSeries {
	g := h.st.Group(base)
	return &reqSeries{g: g, fam: fam, requests: g.Series(fam.requests, nil)}
}

func (r *reqSeries) alive() bool { return r != nil && r.g.Alive() }

func (r *reqSeries) request(now time.Time) {
	r.g.Touch(now)
	r.requests.Inc()
}

func (r *reqSeries) latency(status uint16, d time.Duration) {
	s, ok := r.lat.load(status)
	if !ok {
		var extra *metricstore.Labels
		if status != 0 {
			extra = (&metricstore.Labels{}).Add("status_code", strconv.Itoa(int(status)))
		}
		s = r.g.Series(r.fam.latency, extra)
		r.lat.store(status, s, 128)
	}
	s.Observe(d)
}

func (r *reqSeries) response(k respKey) {
	s, ok := r.rsp.load(k)
	if !ok {
		extra := &metricstore.Labels{}
		if k.status != 0 {
			extra.Add("status_code", strconv.Itoa(int(k.status)))
		}
		extra.Add("classification", classLabel(k.failure))
		if k.grpc >= 0 {
			extra.Add("grpc_status", strconv.Itoa(int(k.grpc)))
		}
		extra.AddIf("error", k.err)
		extra.AddIf("tls", k.tls)
		s = r.g.Series(r.fam.responses, extra)
		r.rsp.store(k, s, 256)
	}
	s.Inc()
}

// statusOf bounds a status code for labels: 0 outside 100..599.
func statusOf(code int) uint16 {
	if code < 100 || code > 599 {
		return 0
	}
	return uint16(code)
}

// grpcOf parses a grpc-status value for labels: -1 when absent, -2 when
// it is not a status code.
func grpcOf(v string) int16 {
	if v == "" {
		return -1
	}
	n, err := strconv.ParseUint(v, 10, 8)
	if err != nil || n > 99 {
		return -2
	}
	return int16(n)
}

// reqStats records one request at the route level (once per request) and
// at the endpoint level (once per attempt, with the labels of the endpoint
// that answered, as Linkerd's endpoint metrics do). It lives on the
// handler's stack; its zero value records nothing.
type reqStats struct {
	ep           *reqSeries // the current attempt's endpoint series
	rt           *reqSeries // the route's series, nil without one
	start        time.Time  // request head received
	attemptStart time.Time
	headDone     bool
}

// begin starts a request on route series rt (may be nil).
func (s *reqStats) begin(rt *reqSeries, now time.Time) {
	s.rt, s.start, s.attemptStart = rt, now, now
	if rt != nil {
		rt.request(now)
	}
}

// attempt starts an attempt on endpoint series ep.
func (s *reqStats) attempt(ep *reqSeries) {
	now := time.Now()
	s.ep, s.attemptStart = ep, now
	if ep != nil {
		ep.request(now)
	}
}

// attemptEnded records an attempt that will not be the answer (it is
// retried): its response, or the error class that ended it.
func (s *reqStats) attemptEnded(status int, grpc string, failure bool, errClass string) {
	if s.ep == nil {
		return
	}
	st := statusOf(status)
	if st != 0 {
		s.ep.latency(st, time.Since(s.attemptStart))
	}
	g := grpcOf(grpc)
	s.ep.response(respKey{status: st, grpc: max(g, -1), failure: failure || g == -2, err: errClass})
	s.ep = nil
}

// head records the latency to the response head.
func (s *reqStats) head(status int) {
	if s.headDone {
		return
	}
	s.headDone = true
	now := time.Now()
	st := statusOf(status)
	if s.ep != nil {
		s.ep.latency(st, now.Sub(s.attemptStart))
	}
	if s.rt != nil {
		s.rt.latency(st, now.Sub(s.start))
	}
}

// done records the response: status, gRPC status (empty when not gRPC),
// classification, and the error class when the response did not complete
// or the proxy answered itself; at the route level also whether the
// endpoint that answered was reached over mutual TLS (tls).
func (s *reqStats) done(status int, grpc string, failure bool, errClass string) {
	g := grpcOf(grpc)
	k := respKey{status: statusOf(status), grpc: max(g, -1), failure: failure || g == -2, err: errClass}
	if s.ep != nil {
		s.ep.response(k)
	}
	if s.rt != nil {
		if s.ep != nil {
			k.tls = s.ep.tls
		}
		s.rt.response(k)
	}
}
