package webhook

import (
	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Metrics are the instruments of the Injector and the Validator, as go-kit
// interfaces so an embedder can back them with Prometheus
// (NewPrometheusMetrics) or anything else. Nil fields record nothing.
// Both are labelled "outcome": injected, skipped, allowed, denied,
// bad_request, too_large, overloaded or error.
type Metrics struct {
	// Requests counts AdmissionReviews answered, by "outcome".
	Requests metrics.Counter
	// Duration observes the time to answer one, in seconds, by "outcome".
	Duration metrics.Histogram
}

// DiscardMetrics returns instruments that record nothing.
func DiscardMetrics() Metrics { return kitmetrics.Defaults(Metrics{}) }

// NewPrometheusMetrics creates the webhook metrics and registers them with
// reg, all or none. The Injector and the Validator of one process share
// them (the outcome tells them apart):
//
//	weft_injector_requests_total{outcome}            counter
//	weft_injector_request_duration_seconds{outcome}  histogram
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	s := kitmetrics.New("injector")
	return kitmetrics.Register("webhook", reg, s, Metrics{
		Requests: s.Counter("requests_total", "AdmissionReviews answered by the injector and validator webhooks, by outcome.", "outcome"),
		Duration: s.Histogram("request_duration_seconds", "Time to answer an AdmissionReview, by outcome.", kitmetrics.SecondsBuckets(), "outcome"),
	})
}
