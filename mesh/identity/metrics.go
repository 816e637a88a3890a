package identity

import (
	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Metrics are the instruments of the identity service and its issuers,
// expressed as go-kit interfaces so an embedder can back them with
// Prometheus (NewPrometheusMetrics) or anything else. Nil fields are
// replaced with discarding instruments.
type Metrics struct {
	// Requests counts Certify calls by "result": ok, invalid_request,
	// unauthenticated, identity_mismatch, invalid_csr, rate_limited,
	// deadline_exceeded, unavailable, error.
	Requests metrics.Counter
	// Latency observes Certify durations in seconds.
	Latency metrics.Histogram
	// IssuerExpiry is the issuer certificate's NotAfter, in Unix seconds.
	IssuerExpiry metrics.Gauge
	// IssuerReloads counts reloads of the issuer's key pair by "result":
	// ok or error.
	IssuerReloads metrics.Counter
}

// DiscardMetrics returns instruments that record nothing.
func DiscardMetrics() Metrics { return kitmetrics.Defaults(Metrics{}) }

// NewPrometheusMetrics creates the identity metrics and registers them with
// reg, all or none:
//
//	weft_identity_certify_requests_total{result}   counter
//	weft_identity_certify_duration_seconds         histogram
//	weft_identity_issuer_expiry_timestamp_seconds  gauge
//	weft_identity_issuer_reloads_total{result}     counter
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	s := kitmetrics.New("identity")
	return kitmetrics.Register("identity", reg, s, Metrics{
		Requests:      s.Counter("certify_requests_total", "Certify requests by result.", "result"),
		Latency:       s.Histogram("certify_duration_seconds", "Time to answer a Certify request.", kitmetrics.SecondsBuckets()),
		IssuerExpiry:  s.Gauge("issuer_expiry_timestamp_seconds", "NotAfter of the issuer certificate in use, as a Unix timestamp."),
		IssuerReloads: s.Counter("issuer_reloads_total", "Reloads of the issuer key pair by result.", "result"),
	})
}
