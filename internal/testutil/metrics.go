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
