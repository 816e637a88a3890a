package identity_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/identity"
)

// The series are documented in docs/identity.md and read by dashboards:
// a renamed series or label must fail here.
func TestPrometheusMetricsKeepTheirDocumentedNamesAndLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := identity.NewPrometheusMetrics(reg)
	require.NoError(t, err)
	m.Requests.With("result", "ok").Add(1)
	m.Latency.Observe(0.01)
	m.IssuerExpiry.Set(1)
	m.IssuerReloads.With("result", "ok").Add(1)
	assert.Equal(t, map[string]string{
		"weft_identity_certify_requests_total":          "counter{result}",
		"weft_identity_certify_duration_seconds":        "histogram{}",
		"weft_identity_issuer_expiry_timestamp_seconds": "gauge{}",
		"weft_identity_issuer_reloads_total":            "counter{result}",
	}, testutil.MetricShapes(t, reg))
}
