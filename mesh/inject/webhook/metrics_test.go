package webhook_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/inject/webhook"
)

// docs/inject.md lists these series: a renamed series or label must fail
// here.
func TestPrometheusMetricsKeepTheirDocumentedNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := webhook.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	m.Requests.With("outcome", "injected").Add(1)
	m.Duration.With("outcome", "injected").Observe(0.01)
	assert.Equal(t, map[string]string{
		"weft_injector_requests_total":           "counter{outcome}",
		"weft_injector_request_duration_seconds": "histogram{outcome}",
	}, testutil.MetricShapes(t, reg))
}
