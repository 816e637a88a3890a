package testutil

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// MetricShapes gathers g and returns, for each family that has at least
// one series, its type and label names: "counter{kind}",
// "histogram{method,result}", "gauge{}". Tests compare it with a literal
// map, so renaming a series or a label fails them. A vector shows up once
// a series of it has been recorded.
func MetricShapes(t testing.TB, g prometheus.Gatherer) map[string]string {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	out := make(map[string]string, len(fams))
	for _, f := range fams {
		var labels []string
		if ms := f.GetMetric(); len(ms) > 0 {
			for _, l := range ms[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		slices.Sort(labels)
		out[f.GetName()] = strings.ToLower(f.GetType().String()) + "{" + strings.Join(labels, ",") + "}"
	}
	return out
}

// GaugeValue gathers g and returns the value of the gauge series name
// whose label has the value value, or -1 when there is no such series
// (a vector shows up once a series of it has been set).
func GaugeValue(t testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
