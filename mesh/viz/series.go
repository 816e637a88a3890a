package viz

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Series is one time series: its metric name (histograms are expanded to
// NAME_bucket with an "le" label, NAME_sum and NAME_count, as Prometheus
// stores them), its labels and one value. In a Scrape the value is the
// series' current value; in a Window a counter's value is its increase
// over the window and a gauge's value its last value.
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Type is how a series changes over time.
type Type uint8

// Types of series. Counters (and histogram parts) only grow, except when
// the process restarts; gauges go up and down.
const (
	Counter Type = iota
	Gauge
)

// Scrape is one target's /metrics at one moment, with the target's own
// labels (namespace, pod and workload, see Target.Labels) added to every
// series, as a Prometheus scrape configured like Linkerd's would add them.
type Scrape struct {
	Target Target
	At     time.Time
	Series []Series
	types  map[string]Type
}

// Type returns the type of the series named name (Counter when unknown).
func (s *Scrape) Type(name string) Type { return s.types[name] }

// Limits on what ParseMetrics accepts from one target. A proxy is a peer
// across a trust boundary: a compromised one must not exhaust the
// collector's memory.
const (
	// MaxMetricsBytes bounds one /metrics body.
	MaxMetricsBytes = 8 << 20
	// MaxSeriesPerTarget bounds the series kept from one target.
	MaxSeriesPerTarget = 50000
)

// ErrTooLarge is returned when a target's metrics exceed the limits.
var ErrTooLarge = errors.New("viz: metrics exceed the size limits")

// ParseMetrics reads the Prometheus text exposition format (what a
// proxy's /metrics serves) from r, keeps at most MaxMetricsBytes and
// MaxSeriesPerTarget, and returns the series with target's labels added.
// Labels the target sets (namespace, pod, workload kind) replace labels of
// the same name in the text, so a target cannot claim to be another pod.
func ParseMetrics(r io.Reader, target Target, at time.Time) (*Scrape, error) {
	lr := &io.LimitedReader{R: r, N: MaxMetricsBytes + 1}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(lr)
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxMetricsBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("viz: metrics of %s: %w", target, err)
	}
	return FromFamilies(mfs, target, at)
}

// FromFamilies converts gathered metric families (a prometheus.Gatherer's
// output) into a Scrape of target.
func FromFamilies(mfs map[string]*dto.MetricFamily, target Target, at time.Time) (*Scrape, error) {
	s := &Scrape{Target: target, At: at, types: map[string]Type{}}
	own := target.Labels()
	add := func(name string, m *dto.Metric, extra map[string]string, v float64) error {
		if len(s.Series) >= MaxSeriesPerTarget {
			return fmt.Errorf("%w: more than %d series", ErrTooLarge, MaxSeriesPerTarget)
		}
		l := make(map[string]string, len(m.GetLabel())+len(own)+len(extra))
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		maps.Copy(l, extra)
		maps.Copy(l, own)
		s.Series = append(s.Series, Series{Name: name, Labels: l, Value: v})
		return nil
	}
	names := make([]string, 0, len(mfs))
	for n := range mfs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		mf := mfs[name]
		for _, m := range mf.GetMetric() {
			var err error
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.types[name] = Counter
				err = add(name, m, nil, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				s.types[name] = Gauge
				err = add(name, m, nil, m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := m.GetHistogram()
				for _, n := range []string{name + "_bucket", name + "_sum", name + "_count"} {
					s.types[n] = Counter
				}
				inf := false
				for _, b := range h.GetBucket() {
					if math.IsInf(b.GetUpperBound(), 1) {
						inf = true
					}
					if err = add(name+"_bucket", m, map[string]string{"le": formatLE(b.GetUpperBound())}, float64(b.GetCumulativeCount())); err != nil {
						break
					}
				}
				if err == nil && !inf {
					err = add(name+"_bucket", m, map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
				}
				if err == nil {
					err = add(name+"_sum", m, nil, h.GetSampleSum())
				}
				if err == nil {
					err = add(name+"_count", m, nil, float64(h.GetSampleCount()))
				}
			case dto.MetricType_SUMMARY:
				// Summaries cannot be aggregated; only their totals are kept.
				s.types[name+"_count"], s.types[name+"_sum"] = Counter, Counter
				err = add(name+"_count", m, nil, float64(m.GetSummary().GetSampleCount()))
				if err == nil {
					err = add(name+"_sum", m, nil, m.GetSummary().GetSampleSum())
				}
			default:
				s.types[name] = Gauge
				err = add(name, m, nil, m.GetUntyped().GetValue())
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func formatLE(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// seriesKey identifies a series by name and labels.
func seriesKey(name string, l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte(1)
		b.WriteString(l[k])
	}
	return b.String()
}

// Window is what happened over a span of time, across targets: for each
// counter series its increase, for each gauge its last value. Windows come
// from two scrapes of the same targets (Delta) or from a Prometheus server
// (increase() over the span). Every view (Stat, Edges, Routes, Authz)
// reads a Window.
type Window struct {
	// Duration is the span the increases cover; 0 means "since the
	// targets started" (Delta with no earlier scrape), in which case rates
	// are not computed.
	Duration time.Duration
	// End is when the span ended.
	End    time.Time
	Series []Series
	// Targets are the targets the window covers, with whether each
	// answered; views use them for pod counts and identities.
	Targets []TargetStatus
}

// TargetStatus is a target and the error of its last scrape (nil when it
// answered).
type TargetStatus struct {
	Target Target
	Err    error
}

// Delta returns the window between prev and cur, which must be scrapes of
// the same target (prev may be nil: every counter then counts from zero).
// A counter lower in cur than in prev was reset (the proxy restarted): its
// increase is its value in cur, as Prometheus' increase() assumes. A
// series absent from prev started between the scrapes, from zero.
func Delta(prev, cur *Scrape) []Series {
	if cur == nil {
		return nil
	}
	before := map[string]float64{}
	if prev != nil {
		for _, s := range prev.Series {
			before[seriesKey(s.Name, s.Labels)] = s.Value
		}
	}
	out := make([]Series, 0, len(cur.Series))
	for _, s := range cur.Series {
		v := s.Value
		if cur.Type(s.Name) == Counter {
			if p, ok := before[seriesKey(s.Name, s.Labels)]; ok && p <= v {
				v -= p
			}
		}
		out = append(out, Series{Name: s.Name, Labels: s.Labels, Value: v})
	}
	return out
}

// NewWindow builds the window between two rounds of scrapes, each keyed
// by Target.Key (prev may be empty: counters then count since each target
// started and Duration is 0). failed lists the targets that did not
// answer in the later round.
func NewWindow(prev, cur map[string]*Scrape, failed []TargetStatus) Window {
	w := Window{Targets: append([]TargetStatus(nil), failed...)}
	keys := make([]string, 0, len(cur))
	for k := range cur {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var span time.Duration
	for _, k := range keys {
		c := cur[k]
		w.Targets = append(w.Targets, TargetStatus{Target: c.Target})
		if c.At.After(w.End) {
			w.End = c.At
		}
		p := prev[k]
		if p != nil && c.At.Sub(p.At) > span {
			span = c.At.Sub(p.At)
		}
		w.Series = append(w.Series, Delta(p, c)...)
	}
	if len(prev) > 0 {
		w.Duration = span
	}
	return w
}
