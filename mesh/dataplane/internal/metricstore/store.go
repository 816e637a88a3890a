package metricstore

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is the type of a family.
type Kind int

// The kinds of family.
const (
	Counter Kind = iota
	Gauge
	Histogram
)

// Family is one metric name.
type Family struct {
	name, help string
	kind       Kind
	bounds     []time.Duration // histogram upper bounds, ascending
	boundsMs   []float64       // the same bounds in milliseconds, as exported
}

// LatencyBoundsMs are Linkerd's response_latency_ms buckets (and those of
// tcp_connection_duration_ms), in milliseconds; +Inf is implicit.
var LatencyBoundsMs = []float64{1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500,
	1000, 2000, 3000, 4000, 5000, 10000, 20000, 30000, 40000, 50000}

// NewFamily returns a family; a histogram gets LatencyBoundsMs.
func NewFamily(name, help string, kind Kind) *Family {
	f := &Family{name: name, help: help, kind: kind}
	if kind == Histogram {
		f.boundsMs = LatencyBoundsMs
		for _, ms := range LatencyBoundsMs {
			f.bounds = append(f.bounds, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	return f
}

// Series is one label set of one family.
type Series struct {
	f      *Family
	desc   *prometheus.Desc
	values []string
	n      atomic.Uint64   // counter
	gauge  atomic.Int64    // gauge
	counts []atomic.Uint64 // histogram, per bucket (not cumulative), +Inf last
	sumNs  atomic.Uint64   // histogram sum in nanoseconds
}

// Inc adds one to a counter series.
func (s *Series) Inc() { s.n.Add(1) }

// AddN adds n to a counter series.
func (s *Series) AddN(n uint64) { s.n.Add(n) }

// Add adds v to a counter series, so that one can stand where a
// prometheus.Counter's Add is expected (the copy loops' byte counters).
func (s *Series) Add(v float64) { s.n.Add(uint64(v)) }

// GaugeAdd adds d (which may be negative) to a gauge series.
func (s *Series) GaugeAdd(d int) { s.gauge.Add(int64(d)) }

// Observe records a duration in a histogram series.
func (s *Series) Observe(d time.Duration) {
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
func (s *Series) metric() prometheus.Metric {
	switch s.f.kind {
	case Gauge:
		return prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, float64(s.gauge.Load()), s.values...)
	case Histogram:
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

// Labels is an ordered list of label names and values under construction.
type Labels struct {
	// Names and Values are parallel: the i-th value belongs to the i-th name.
	Names, Values []string
}

// Add appends a label and returns l, so that calls chain.
func (l *Labels) Add(name, value string) *Labels {
	l.Names = append(l.Names, name)
	l.Values = append(l.Values, value)
	return l
}

// AddIf adds the label only when value is not empty (Linkerd leaves such
// labels out).
func (l *Labels) AddIf(name, value string) *Labels {
	if value != "" {
		l.Add(name, value)
	}
	return l
}

func (l *Labels) clone() *Labels {
	return &Labels{Names: append([]string(nil), l.Names...), Values: append([]string(nil), l.Values...)}
}

// key renders the label set as a map key.
func (l *Labels) key() string {
	var b strings.Builder
	for i, n := range l.Names {
		b.WriteString(n)
		b.WriteByte(0)
		b.WriteString(l.Values[i])
		b.WriteByte(0)
	}
	return b.String()
}

// Group is a set of series sharing a base label set and a lifetime.
type Group struct {
	st       *Store
	key      string
	base     *Labels
	lastUsed atomic.Int64 // unix seconds
	pins     atomic.Int64 // holders that keep the group alive (open connections)
	dead     atomic.Bool

	mu      sync.Mutex
	members map[string]*Series // family name + extra labels -> series
}

// Alive reports whether the group is still exported; a dead group's
// holder must resolve it again.
func (g *Group) Alive() bool { return g != nil && !g.dead.Load() }

// Touch marks the group used at now.
func (g *Group) Touch(now time.Time) {
	if s := now.Unix(); g.lastUsed.Load() != s {
		g.lastUsed.Store(s)
	}
}

// Pin keeps the group exported while its holder lives (an open
// connection), however long it goes unused; Unpin ends that hold. Each
// Pin needs exactly one Unpin.
func (g *Group) Pin() { g.pins.Add(1) }

// Unpin ends a hold taken by Pin.
func (g *Group) Unpin() { g.pins.Add(-1) }

// Series returns the series of family f with the group's labels plus
// extra (nil for none), creating it on first use. It is for set-up and
// cache misses, not for per-request work.
func (g *Group) Series(f *Family, extra *Labels) *Series {
	k := f.name
	if extra != nil {
		k += "\x00" + extra.key()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.members[k]; s != nil {
		return s
	}
	names := append(append([]string(nil), g.base.Names...), extraNames(extra)...)
	values := append(append([]string(nil), g.base.Values...), extraValues(extra)...)
	s := &Series{f: f, values: values, desc: prometheus.NewDesc(f.name, f.help, names, nil)}
	if f.kind == Histogram {
		s.counts = make([]atomic.Uint64, len(f.bounds)+1)
	}
	if g.members == nil {
		g.members = map[string]*Series{}
	}
	g.members[k] = s
	return s
}

func extraNames(l *Labels) []string {
	if l == nil {
		return nil
	}
	return l.Names
}

func extraValues(l *Labels) []string {
	if l == nil {
		return nil
	}
	return l.Values
}

// Store holds every group and exports them as a prometheus.Collector.
type Store struct {
	retainIdle time.Duration
	maxGroups  int
	overflow   prometheus.Counter

	mu        sync.Mutex
	groups    map[string]*Group
	lastSweep time.Time
}

// Defaults of the store: Linkerd's retain-idle period, and a cap far above
// what bounded label sources produce (endpoints, identities, policy
// objects), as a last resort against a hostile or broken source.
const (
	defaultRetainIdle = 10 * time.Minute
	defaultMaxGroups  = 20000
)

// NewStore returns an empty store; overflow counts the label sets folded
// into an overflow group past the store's cap.
func NewStore(overflow prometheus.Counter) *Store {
	return &Store{retainIdle: defaultRetainIdle, maxGroups: defaultMaxGroups, overflow: overflow, groups: map[string]*Group{}}
}

// Group returns the live group of a base label set, creating it. Past
// maxGroups every new label set shares one overflow group per kind
// (its labels: direction and overflow="true"), and the overflow counter
// says so.
func (st *Store) Group(base *Labels) *Group {
	k := base.key()
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	if g := st.groups[k]; g != nil {
		g.Touch(now)
		return g
	}
	if now.Sub(st.lastSweep) > st.retainIdle/4 {
		st.sweepLocked(now)
	}
	pin := false
	if len(st.groups) >= st.maxGroups {
		st.overflow.Inc()
		dir := ""
		for i, n := range base.Names {
			if n == "direction" {
				dir = base.Values[i]
			}
		}
		base = (&Labels{}).Add("direction", dir).Add("overflow", "true")
		k = base.key()
		if g := st.groups[k]; g != nil {
			g.Touch(now)
			return g
		}
		pin = true // one per direction, kept for the proxy's lifetime
	}
	g := &Group{st: st, key: k, base: base.clone()}
	g.Touch(now)
	if pin {
		g.pins.Store(1)
	}
	st.groups[k] = g
	return g
}

// sweepLocked drops groups nobody used for retainIdle and nobody pins.
func (st *Store) sweepLocked(now time.Time) {
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
func (st *Store) Describe(chan<- *prometheus.Desc) {}

// Collect exports every live series and drops idle groups.
func (st *Store) Collect(ch chan<- prometheus.Metric) {
	st.mu.Lock()
	st.sweepLocked(time.Now())
	gs := make([]*Group, 0, len(st.groups))
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
func (st *Store) size() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.groups)
}
