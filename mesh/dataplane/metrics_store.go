package dataplane

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The proxy's Linkerd-named series (request_total, response_total,
// response_latency_ms, route_*, tcp_*, inbound_*_authz_*) live in a store
// of their own rather than in client_golang vectors, for three reasons:
//
//   - Linkerd's label sets differ within one family (an inbound series has
//     client_id and srv_*, an outbound one server_id and dst_*; a plaintext
//     one no_tls_reason instead of an identity), and Linkerd's dashboards
//     and tools read them that way. The store emits each series with
//     exactly its own labels.
//   - The data path works on series it resolved once (per endpoint, per
//     connection, per policy route): a request adds to atomic counters and
//     never hashes label values.
//   - Series nobody has used for retainIdle are dropped, as Linkerd does,
//     so endpoint churn does not grow the proxy forever; and the number of
//     label sets is capped as a last resort.
//
// A group is the unit of lifetime: the series that share one base label
// set (one endpoint, one connection class, one policy route) appear and
// disappear together. Holders keep *group pointers in caches and re-resolve
// one that the store has dropped (dead).

// metricKind is the type of a family.
type metricKind int

const (
	kindCounter metricKind = iota
	kindGauge
	kindHistogram
)

// family is one metric name.
type family struct {
	name, help string
	kind       metricKind
	bounds     []time.Duration // histogram upper bounds, ascending
	boundsMs   []float64       // the same bounds in milliseconds, as exported
}

// latencyBoundsMs are Linkerd's response_latency_ms buckets (and those of
// tcp_connection_duration_ms), in milliseconds; +Inf is implicit.
var latencyBoundsMs = []float64{1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500,
	1000, 2000, 3000, 4000, 5000, 10000, 20000, 30000, 40000, 50000}

func newFamily(name, help string, kind metricKind) *family {
	f := &family{name: name, help: help, kind: kind}
	if kind == kindHistogram {
		f.boundsMs = latencyBoundsMs
		for _, ms := range latencyBoundsMs {
			f.bounds = append(f.bounds, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	return f
}

// series is one label set of one family.
type series struct {
	f      *family
	desc   *prometheus.Desc
	values []string
	n      atomic.Uint64   // counter
	gauge  atomic.Int64    // gauge
	counts []atomic.Uint64 // histogram, per bucket (not cumulative), +Inf last
	sumNs  atomic.Uint64   // histogram sum in nanoseconds
}

func (s *series) inc()           { s.n.Add(1) }
func (s *series) add(n uint64)   { s.n.Add(n) }
func (s *series) gaugeAdd(d int) { s.gauge.Add(int64(d)) }

// observe records a duration in a histogram series.
func (s *series) observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	b := s.f.bounds
	lo, hi := 0, len(b)
	for lo < hi { // first bound >= d
		mid := int(uint(lo+hi) >> 1)
		if b[mid] < d {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	s.counts[lo].Add(1)
	s.sumNs.Add(uint64(d))
}

// metric renders the series as a constant Prometheus metric.
func (s *series) metric() prometheus.Metric {
	switch s.f.kind {
	case kindGauge:
		return prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(s.gauge.Load()), s.values...)
	case kindHistogram:
		buckets := make(map[float64]uint64, len(s.f.boundsMs))
		var cum uint64
		for i, ub := range s.f.boundsMs {
			cum += s.counts[i].Load()
			buckets[ub] = cum
		}
		cum += s.counts[len(s.f.boundsMs)].Load()
		return prometheus.MustNewConstHistogram(s.desc, cum, float64(s.sumNs.Load())/float64(time.Millisecond), buckets, s.values...)
	}
	return prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, float64(s.n.Load()), s.values...)
}

// labels is an ordered list of label names and values under construction.
type labels struct {
	names, values []string
}

func (l *labels) add(name, value string) *labels {
	l.names = append(l.names, name)
	l.values = append(l.values, value)
	return l
}

// addIf adds the label only when value is not empty (Linkerd leaves such
// labels out).
func (l *labels) addIf(name, value string) *labels {
	if value != "" {
		l.add(name, value)
	}
	return l
}

func (l *labels) clone() *labels {
	return &labels{names: append([]string(nil), l.names...), values: append([]string(nil), l.values...)}
}

// key renders the label set as a map key.
func (l *labels) key() string {
	var b strings.Builder
	for i, n := range l.names {
		b.WriteString(n)
		b.WriteByte(0)
		b.WriteString(l.values[i])
		b.WriteByte(0)
	}
	return b.String()
}

// group is a set of series sharing a base label set and a lifetime.
type group struct {
	st       *store
	key      string
	base     *labels
	lastUsed atomic.Int64 // unix seconds
	pins     atomic.Int64 // holders that keep the group alive (open connections)
	dead     atomic.Bool

	mu      sync.Mutex
	members map[string]*series // family name + extra labels -> series
}

// alive reports whether the group is still exported; a dead group's
// holder must resolve it again.
func (g *group) alive() bool { return g != nil && !g.dead.Load() }

// touch marks the group used at now.
func (g *group) touch(now time.Time) {
	if s := now.Unix(); g.lastUsed.Load() != s {
		g.lastUsed.Store(s)
	}
}

// series returns the series of family f with the group's labels plus
// extra (nil for none), creating it on first use. It is for set-up and
// cache misses, not for per-request work.
func (g *group) series(f *family, extra *labels) *series {
	k := f.name
	if extra != nil {
		k += "\x00" + extra.key()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.members[k]; s != nil {
		return s
	}
	names := append(append([]string(nil), g.base.names...), extraNames(extra)...)
	values := append(append([]string(nil), g.base.values...), extraValues(extra)...)
	s := &series{f: f, values: values, desc: prometheus.NewDesc(f.name, f.help, names, nil)}
	if f.kind == kindHistogram {
		s.counts = make([]atomic.Uint64, len(f.bounds)+1)
	}
	if g.members == nil {
		g.members = map[string]*series{}
	}
	g.members[k] = s
	return s
}

func extraNames(l *labels) []string {
	if l == nil {
		return nil
	}
	return l.names
}

func extraValues(l *labels) []string {
	if l == nil {
		return nil
	}
	return l.values
}

// store holds every group and exports them as a prometheus.Collector.
type store struct {
	retainIdle time.Duration
	maxGroups  int
	overflow   prometheus.Counter

	mu        sync.Mutex
	groups    map[string]*group
	lastSweep time.Time
}

// Defaults of the store: Linkerd's retain-idle period, and a cap far above
// what bounded label sources produce (endpoints, identities, policy
// objects), as a last resort against a hostile or broken source.
const (
	defaultRetainIdle = 10 * time.Minute
	defaultMaxGroups  = 20000
)

func newStore(overflow prometheus.Counter) *store {
	return &store{retainIdle: defaultRetainIdle, maxGroups: defaultMaxGroups, overflow: overflow, groups: map[string]*group{}}
}

// group returns the live group of a base label set, creating it. Past
// maxGroups every new label set shares one overflow group per kind
// (its labels: direction and overflow="true"), and the overflow counter
// says so.
func (st *store) group(base *labels) *group {
	k := base.key()
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if g := st.groups[k]; g != nil {
		g.touch(now)
		return g
	}
	if now.Sub(st.lastSweep) > st.retainIdle/4 {
		st.sweepLocked(now)
	}
	pin := false
	if len(st.groups) >= st.maxGroups {
		st.overflow.Inc()
		dir := ""
		for i, n := range base.names {
			if n == "direction" {
				dir = base.values[i]
			}
		}
		base = (&labels{}).add("direction", dir).add("overflow", "true")
		k = base.key()
		if g := st.groups[k]; g != nil {
			g.touch(now)
			return g
		}
		pin = true // one per direction, kept for the proxy's lifetime
	}
	g := &group{st: st, key: k, base: base.clone()}
	g.touch(now)
	if pin {
		g.pins.Store(1)
	}
	st.groups[k] = g
	return g
}

// sweepLocked drops groups nobody used for retainIdle and nobody pins.
func (st *store) sweepLocked(now time.Time) {
	st.lastSweep = now
	cutoff := now.Add(-st.retainIdle).Unix()
	for k, g := range st.groups {
		if g.pins.Load() <= 0 && g.lastUsed.Load() < cutoff {
			g.dead.Store(true)
			delete(st.groups, k)
		}
	}
}

// Describe sends nothing: the store is an unchecked collector, because
// its label sets vary within a family, as Linkerd's do.
func (st *store) Describe(chan<- *prometheus.Desc) {}

// Collect exports every live series and drops idle groups.
func (st *store) Collect(ch chan<- prometheus.Metric) {
	st.mu.Lock()
	st.sweepLocked(time.Now())
	gs := make([]*group, 0, len(st.groups))
	for _, g := range st.groups {
		gs = append(gs, g)
	}
	st.mu.Unlock()
	for _, g := range gs {
		g.mu.Lock()
		for _, s := range g.members {
			ch <- s.metric()
		}
		g.mu.Unlock()
	}
}

// size reports the live groups, for tests.
func (st *store) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.groups)
}
