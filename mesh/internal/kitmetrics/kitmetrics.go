// Package kitmetrics is the metrics setup every control-plane package of
// Weft shares, written once. Each package (discovery, identity, policy,
// inject/webhook) exposes a Metrics struct of go-kit instruments; this
// package fills the nil fields of such a struct with discarding
// instruments (Defaults), and builds the Prometheus-backed instruments of
// one subsystem (Set): a vector named weft_<subsystem>_<name>, registered
// with the caller's prometheus.Registerer, wrapped in go-kit's Prometheus
// adapter.
//
// It is internal to mesh/: the series each package exports are part of
// that package's documented API, not of this helper's.
package kitmetrics

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/go-kit/kit/metrics"
	"github.com/go-kit/kit/metrics/discard"
	kitprom "github.com/go-kit/kit/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every series a Set builds.
const Namespace = "weft"

// SecondsBuckets are the upper bounds, in seconds, of Weft's latency
// histograms: from half a millisecond (a Certify call, a small index
// build) to ten seconds (the longest deadline a control-plane request
// gets). A new slice each call, so no caller can change another's.
func SecondsBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
}

var (
	counterType   = reflect.TypeFor[metrics.Counter]()
	gaugeType     = reflect.TypeFor[metrics.Gauge]()
	histogramType = reflect.TypeFor[metrics.Histogram]()
)

// Defaults returns m with every nil exported field of type
// metrics.Counter, metrics.Gauge or metrics.Histogram replaced by a
// discarding instrument; other fields are left as they are. M must be a
// struct type (each package's Metrics); anything else is a programming
// error and panics.
func Defaults[M any](m M) M {
	v := reflect.ValueOf(&m).Elem()
	if v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("kitmetrics: Defaults of %s: want a struct", v.Type()))
	}
	for i := range v.NumField() {
		f := v.Field(i)
		if !f.CanSet() || f.Kind() != reflect.Interface || !f.IsNil() {
			continue
		}
		switch f.Type() {
		case counterType:
			f.Set(reflect.ValueOf(discard.NewCounter()))
		case gaugeType:
			f.Set(reflect.ValueOf(discard.NewGauge()))
		case histogramType:
			f.Set(reflect.ValueOf(discard.NewHistogram()))
		}
	}
	return m
}

// Set collects the Prometheus vectors of one subsystem until Register
// adds them to a registry, all or none. The instruments it returns record
// into those vectors whether or not they have been registered yet.
type Set struct {
	subsystem  string
	names      []string
	collectors []prometheus.Collector
}

// New starts the set of weft_<subsystem>_* series.
func New(subsystem string) *Set { return &Set{subsystem: subsystem} }

func (s *Set) add(name string, c prometheus.Collector) {
	s.names = append(s.names, prometheus.BuildFQName(Namespace, s.subsystem, name))
	s.collectors = append(s.collectors, c)
}

// Counter adds the counter vector weft_<subsystem>_<name> with the given
// help text and label names.
func (s *Set) Counter(name, help string, labels ...string) metrics.Counter {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.subsystem, Name: name, Help: help}, labels)
	s.add(name, v)
	return kitprom.NewCounter(v)
}

// Gauge adds the gauge vector weft_<subsystem>_<name> with the given help
// text and label names.
func (s *Set) Gauge(name, help string, labels ...string) metrics.Gauge {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.subsystem, Name: name, Help: help}, labels)
	s.add(name, v)
	return kitprom.NewGauge(v)
}

// Histogram adds the histogram vector weft_<subsystem>_<name> with the
// given help text, bucket upper bounds (nil: Prometheus's default buckets)
// and label names.
func (s *Set) Histogram(name, help string, buckets []float64, labels ...string) metrics.Histogram {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.subsystem, Name: name, Help: help, Buckets: buckets}, labels)
	s.add(name, v)
	return kitprom.NewHistogram(v)
}

// Register registers s with reg and returns m, the instruments the
// caller built from s, or the zero M and an error that starts with pkg
// and names the series that could not be registered.
func Register[M any](pkg string, reg prometheus.Registerer, s *Set, m M) (M, error) {
	if err := s.Register(reg); err != nil {
		var zero M
		return zero, fmt.Errorf("%s: register metrics: %w", pkg, err)
	}
	return m, nil
}

// Register adds every vector of the set to reg. When one cannot be
// registered (a name already taken, an invalid name or label) it takes
// back those it had added and returns an error naming the series, so reg
// is left as it was.
func (s *Set) Register(reg prometheus.Registerer) error {
	if reg == nil {
		return errors.New("no registerer")
	}
	for i, c := range s.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range s.collectors[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("%s: %w", s.names[i], err)
		}
	}
	return nil
}
