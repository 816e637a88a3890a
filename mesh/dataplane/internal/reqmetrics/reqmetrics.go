package reqmetrics

import (
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
)

// HTTP holds the request-level families: Linkerd's endpoint-level
// families (request_total, response_total, response_latency_ms), route-level
// families (route_*) and inbound authorization counters in the store, and
// Weft's extras as client_golang vectors. Label values come from discovery,
// policy, verified certificates and fixed enumerations, never from a raw
// Host, path or header (Linkerd CVE-2025-43915). Authorities are
// additionally capped: past MaxTargetLabels distinct values, new ones count
// as "overflow".
type HTTP struct {
	Store *metricstore.Store

	EP, Route Families

	AuthzAllow, AuthzDeny, AuthzAudit, RouteNotFound *metricstore.Family

	Retries   *prometheus.CounterVec
	Exhausted *prometheus.CounterVec
	Errors    *prometheus.CounterVec
	Protocol  *prometheus.CounterVec

	Targets    LabelBudget // outbound authorities
	InboundDst LabelBudget // inbound: Services named by peer proxies that discovery knows
}

// Families are the families of one level (endpoint or route).
type Families struct {
	Requests, Responses, Latency *metricstore.Family
	Retryable                    *metricstore.Family // route level only
}

// MaxTargetLabels bounds the distinct authority label values.
const MaxTargetLabels = 500

// New returns the request-level families, with their series in st.
func New(st *metricstore.Store) *HTTP {
	return &HTTP{
		Store: st,
		EP: Families{
			Requests:  metricstore.NewFamily("request_total", "Total count of HTTP requests.", metricstore.Counter),
			Responses: metricstore.NewFamily("response_total", "Total count of HTTP responses.", metricstore.Counter),
			Latency: metricstore.NewFamily("response_latency_ms",
				"Elapsed times between a request's headers being received and its response's headers being sent, in milliseconds.", metricstore.Histogram),
		},
		Route: Families{
			Requests:  metricstore.NewFamily("route_request_total", "Total count of HTTP requests, by route.", metricstore.Counter),
			Responses: metricstore.NewFamily("route_response_total", "Total count of HTTP responses, by route.", metricstore.Counter),
			Latency: metricstore.NewFamily("route_response_latency_ms",
				"Elapsed times between a request's headers being received and its response's headers being sent, by route, in milliseconds.", metricstore.Histogram),
			Retryable: metricstore.NewFamily("route_retryable_total", "Total count of retryable HTTP responses, by route.", metricstore.Counter),
		},
		AuthzAllow: metricstore.NewFamily("inbound_http_authz_allow_total",
			"The total number of inbound HTTP requests that were authorized.", metricstore.Counter),
		AuthzDeny: metricstore.NewFamily("inbound_http_authz_deny_total",
			"The total number of inbound HTTP requests that were denied by authorization policy.", metricstore.Counter),
		AuthzAudit: metricstore.NewFamily("inbound_http_authz_audit_total",
			"Inbound HTTP requests only an audit policy admitted (let through and reported).", metricstore.Counter),
		RouteNotFound: metricstore.NewFamily("inbound_http_route_not_found_total",
			"The total number of inbound HTTP requests that could not be associated with a route.", metricstore.Counter),
		Retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_http_retries_total", Help: "Outbound HTTP retries, by target, route and reason (status, error, timeout).",
		}, []string{"target", "route", "reason"}),
		Exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "outbound_http_retry_budget_exhausted_total", Help: "Retries skipped because the retry budget was spent.",
		}, []string{"target", "route"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_errors_total", Help: "Requests the proxy answered itself, by direction, target and reason class.",
		}, []string{"direction", "target", "reason"}),
		Protocol: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_protocol_errors_total", Help: "HTTP connections or requests refused for protocol violations, by direction and reason class.",
		}, []string{"direction", "reason"}),
	}
}

// Collectors are the client_golang vectors, for the proxy's registry.
func (h *HTTP) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.Retries, h.Exhausted, h.Errors, h.Protocol}
}

// AuthorityLabel is the authority label of an outbound target: a name is
// budgeted (MaxTargetLabels), an IP:port has no authority (as Linkerd).
func (h *HTTP) AuthorityLabel(target string) string {
	if _, err := netip.ParseAddrPort(target); err == nil || target == "" {
		return ""
	}
	return h.Targets.Admit(target)
}

// LabelBudget admits the first MaxTargetLabels distinct values of a
// label; later ones are "overflow". Its zero value is ready.
type LabelBudget struct {
	mu   sync.Mutex
	seen map[string]bool
}

// Admit returns the label value v is counted under.
func (b *LabelBudget) Admit(v string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= MaxTargetLabels {
		return "overflow"
	}
	v = metricstore.LabelValue(v)
	b.seen[v] = true
	return v
}

// Cache is a map the data path reads without a lock and that is written
// by copying, for caches that change rarely. Past max entries it starts
// over (the entries are re-resolved from the store, which deduplicates).
// Its zero value is ready.
type Cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

// Load returns the value of k.
func (c *Cache[K, V]) Load(k K) (V, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// Store sets k to v, starting over past max entries.
func (c *Cache[K, V]) Store(k K, v V, max int) {
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

// MaxCacheEntries bounds each per-service and per-port series cache.
const MaxCacheEntries = 4096

// Series are the series of one request label set at one level: the
// request counter, latency histograms by status and response counters by
// outcome, the last two resolved on first use and cached.
type Series struct {
	g        *metricstore.Group
	fam      *Families
	requests *metricstore.Series
	lat      Cache[uint16, *metricstore.Series]
	rsp      Cache[respKey, *metricstore.Series]
	// TLS is the tls label of an endpoint-level series ("true" or
	// "no_identity"; empty when no connection carried the request): the
	// route-level response of a request gets the tls of the endpoint
	// series that answered it.
	TLS string
	retrySeries
}

// TLSValue is the tls label of a request that went over mutual TLS or not.
func TLSValue(mtls bool) string {
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

// Series returns the series of the request label set base at the level
// of fam (&h.EP or &h.Route).
func (h *HTTP) Series(fam *Families, base *metricstore.Labels) *Series {
	g := h.Store.Group(base)
	return &Series{g: g, fam: fam, requests: g.Series(fam.Requests, nil)}
}

// Alive reports whether r's group is still in the store (false for nil):
// a cache holding r resolves it again when not.
func (r *Series) Alive() bool { return r != nil && r.g.Alive() }

// Group is r's group in the store.
func (r *Series) Group() *metricstore.Group { return r.g }

func (r *Series) request(now time.Time) {
	r.g.Touch(now)
	r.requests.Inc()
}

func (r *Series) latency(status uint16, d time.Duration) {
	s, ok := r.lat.Load(status)
	if !ok {
		var extra *metricstore.Labels
		if status != 0 {
			extra = (&metricstore.Labels{}).Add("status_code", strconv.Itoa(int(status)))
		}
		s = r.g.Series(r.fam.Latency, extra)
		r.lat.Store(status, s, 128)
	}
	s.Observe(d)
}

func (r *Series) response(k respKey) {
	s, ok := r.rsp.Load(k)
	if !ok {
		extra := &metricstore.Labels{}
		if k.status != 0 {
			extra.Add("status_code", strconv.Itoa(int(k.status)))
		}
		extra.Add("classification", metricstore.Classification(k.failure))
		if k.grpc >= 0 {
			extra.Add("grpc_status", strconv.Itoa(int(k.grpc)))
		}
		extra.AddIf("error", k.err)
		extra.AddIf("tls", k.tls)
		s = r.g.Series(r.fam.Responses, extra)
		r.rsp.Store(k, s, 256)
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

// Stats records one request at the route level (once per request) and
// at the endpoint level (once per attempt, with the labels of the endpoint
// that answered, as Linkerd's endpoint metrics do). It lives on the
// handler's stack; its zero value records nothing.
type Stats struct {
	ep           *Series   // the current attempt's endpoint series
	rt           *Series   // the route's series, nil without one
	start        time.Time // request head received
	attemptStart time.Time
	headDone     bool
}

// Begin starts a request on route series rt (may be nil).
func (s *Stats) Begin(rt *Series, now time.Time) {
	s.rt, s.start, s.attemptStart = rt, now, now
	if rt != nil {
		rt.request(now)
	}
}

// Attempt starts an attempt on endpoint series ep.
func (s *Stats) Attempt(ep *Series) {
	now := time.Now()
	s.ep, s.attemptStart = ep, now
	if ep != nil {
		ep.request(now)
	}
}

// AttemptEnded records an attempt that will not be the answer (it is
// retried): its response, or the error class that ended it.
func (s *Stats) AttemptEnded(status int, grpc string, failure bool, errClass string) {
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

// Attempting reports whether an attempt was started and not ended.
func (s *Stats) Attempting() bool { return s.ep != nil }

// Head records the latency to the response head (once).
func (s *Stats) Head(status int) {
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

// Done records the response: status, gRPC status (empty when not gRPC),
// classification, and the error class when the response did not complete
// or the proxy answered itself; at the route level also whether the
// endpoint that answered was reached over mutual TLS (tls).
func (s *Stats) Done(status int, grpc string, failure bool, errClass string) {
	g := grpcOf(grpc)
	k := respKey{status: statusOf(status), grpc: max(g, -1), failure: failure || g == -2, err: errClass}
	if s.ep != nil {
		s.ep.response(k)
	}
	if s.rt != nil {
		if s.ep != nil {
			k.tls = s.ep.TLS
		}
		s.rt.response(k)
	}
}
