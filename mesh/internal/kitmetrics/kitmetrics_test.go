package kitmetrics_test

import (
	"testing"

	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

type sample struct {
	Requests metrics.Counter
	Open     metrics.Gauge
	Latency  metrics.Histogram
	Name     string
	Other    any
	hidden   metrics.Counter
}

type gauge struct{ v float64 }

func (g *gauge) With(...string) metrics.Gauge { return g }
func (g *gauge) Set(v float64)                { g.v = v }
func (g *gauge) Add(d float64)                { g.v += d }

func TestDefaultsFillsOnlyTheNilInstruments(t *testing.T) {
	mine := &gauge{}
	got := kitmetrics.Defaults(sample{Open: mine, Name: "kept"})
	require.NotNil(t, got.Requests)
	require.NotNil(t, got.Latency)
	got.Open.Set(4)
	assert.Equal(t, 4.0, mine.v, "a set field is kept")
	assert.Equal(t, "kept", got.Name)
	assert.Nil(t, got.Other, "an interface of another type is not an instrument")
	assert.Nil(t, got.hidden, "unexported fields are not touched")
	// The discarding instruments take any labels.
	got.Requests.With("result", "ok").Add(1)
	got.Latency.With("a", "b").Observe(1)
}

func TestDefaultsRefusesWhatIsNotAStruct(t *testing.T) {
	assert.PanicsWithValue(t, "kitmetrics: Defaults of int: want a struct", func() { kitmetrics.Defaults(3) })
}

func TestSetRegistersWeftSeriesWithTheirHelpLabelsAndBuckets(t *testing.T) {
	s := kitmetrics.New("demo")
	c := s.Counter("requests_total", "Requests by result.", "result")
	g := s.Gauge("open", "Open things.")
	h := s.Histogram("duration_seconds", "Time taken.", []float64{0.5, 1}, "kind")
	reg := prometheus.NewRegistry()
	require.NoError(t, s.Register(reg))

	c.With("result", "ok").Add(2)
	g.Set(3)
	h.With("kind", "a").Observe(0.7)
	assert.Equal(t, map[string]string{
		"weft_demo_requests_total":   "counter{result}",
		"weft_demo_open":             "gauge{}",
		"weft_demo_duration_seconds": "histogram{kind}",
	}, testutil.MetricShapes(t, reg))

	fams, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]string{}
	for _, f := range fams {
		byName[f.GetName()] = f.GetHelp()
		if f.GetName() == "weft_demo_duration_seconds" {
			var bounds []float64
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			assert.Equal(t, []float64{0.5, 1}, bounds)
			assert.Equal(t, 0.7, f.GetMetric()[0].GetHistogram().GetSampleSum())
		}
		if f.GetName() == "weft_demo_requests_total" {
			assert.Equal(t, 2.0, f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	assert.Equal(t, "Requests by result.", byName["weft_demo_requests_total"])
	assert.Equal(t, "Open things.", byName["weft_demo_open"])
}

func TestSetRegistersAllOrNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := kitmetrics.New("demo")
	taken.Gauge("open", "Open things.")
	require.NoError(t, taken.Register(reg))

	s := kitmetrics.New("demo")
	s.Counter("requests_total", "Requests.", "result")
	s.Gauge("open", "Open things.")
	err := s.Register(reg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "weft_demo_open", "the error names the series")

	// requests_total was registered and then taken back: a set that uses the
	// name again registers, which it could not if the first were still there.
	again := kitmetrics.New("demo")
	again.Counter("requests_total", "Requests.", "result")
	assert.NoError(t, again.Register(reg))
}

type pair struct {
	Requests metrics.Counter
	Open     metrics.Gauge
}

func TestRegisterReturnsTheInstrumentsOrAnErrorNamingThePackageAndSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := func() (pair, error) {
		s := kitmetrics.New("demo")
		return kitmetrics.Register("demopkg", reg, s, pair{
			Requests: s.Counter("requests_total", "Requests.", "result"),
			Open:     s.Gauge("open", "Open things."),
		})
	}
	m, err := build()
	require.NoError(t, err)
	require.NotNil(t, m.Requests)
	m.Open.Set(1)
	assert.Equal(t, map[string]string{"weft_demo_open": "gauge{}"}, testutil.MetricShapes(t, reg))

	m, err = build()
	require.EqualError(t, err, "demopkg: register metrics: weft_demo_requests_total: duplicate metrics collector registration attempted")
	assert.Equal(t, pair{}, m, "no instruments on failure")
}

func TestSetRefusesANilRegisterer(t *testing.T) {
	s := kitmetrics.New("demo")
	s.Gauge("open", "Open things.")
	assert.EqualError(t, s.Register(nil), "no registerer")
}
