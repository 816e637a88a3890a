package discovery_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/discovery"
)

// The series are documented in docs/discovery.md and read by dashboards:
// a renamed series or label must fail here.
func TestPrometheusMetricsKeepTheirDocumentedNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := discovery.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	m.Subscriptions.With("kind", "endpoints").Add(1)
	m.Topics.With("kind", "profile").Add(1)
	m.Snapshots.With("kind", "endpoints").Add(1)
	m.Rejected.With("kind", "Service").Add(1)
	m.Messages.With("method", "Get").Add(1)
	assert.Equal(t, map[string]string{
		"weft_discovery_subscriptions":             "gauge{kind}",
		"weft_discovery_topics":                    "gauge{kind}",
		"weft_discovery_snapshots_published_total": "counter{kind}",
		"weft_discovery_objects_rejected_total":    "counter{kind}",
		"weft_discovery_messages_sent_total":       "counter{method}",
	}, testutil.MetricShapes(t, reg))
}

func TestDiscardMetricsHaveEveryInstrument(t *testing.T) {
	m := discovery.DiscardMetrics()
	m.Subscriptions.With("kind", "endpoints").Add(1)
	m.Topics.With("kind", "endpoints").Set(1)
	m.Snapshots.With("kind", "endpoints").Add(1)
	m.Rejected.With("kind", "Pod").Add(1)
	m.Messages.With("method", "Get").Add(1)
}
