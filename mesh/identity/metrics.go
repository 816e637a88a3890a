package identity

import (
	"fmt"

	"github.com/go-kit/kit/metrics"
	"github.com/go-kit/kit/metrics/discard"
	kitprom "github.com/go-kit/kit/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the instruments of the identity service and its issuers,
// expressed as go-kit interfaces so an embedder can back them with
// Prometheus (NewPrometheusMetrics) or anything else. Nil fields are
// replaced with discarding instruments.
type Metrics struct {
	// Requests counts Certify calls by "result": ok, invalid_request,
	// unauthenticated, identity_mismatch, invalid_csr, unavailable, error.
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
func DiscardMetrics() Metrics {
	return Metrics{}.withDefaults()
}

func (m Metrics) withDefaults() Metrics {
	if m.Requests == nil {
		m.Requests = discard.NewCounter()
	}
	if m.Latency == nil {
		m.Latency = discard.NewHistogram()
	}
	if m.IssuerExpiry == nil {
		m.IssuerExpiry = discard.NewGauge()
	}
	if m.IssuerReloads == nil {
		m.IssuerReloads = discard.NewCounter()
	}
	return m
}

// NewPrometheusMetrics creates the identity metrics and registers them with
// reg:
//
//	weft_identity_certify_requests_total{result}   counter
//	weft_identity_certify_duration_seconds         histogram
//	weft_identity_issuer_expiry_timestamp_seconds  gauge
//	weft_identity_issuer_reloads_total{result}     counter
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "weft", Subsystem: "identity", Name: "certify_requests_total",
		Help: "Certify requests by result.",
	}, []string{"result"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "weft", Subsystem: "identity", Name: "certify_duration_seconds",
		Help:    "Time to answer a Certify request.",
		Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, nil)
	expiry := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "weft", Subsystem: "identity", Name: "issuer_expiry_timestamp_seconds",
		Help: "NotAfter of the issuer certificate in use, as a Unix timestamp.",
	}, nil)
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "weft", Subsystem: "identity", Name: "issuer_reloads_total",
		Help: "Reloads of the issuer key pair by result.",
	}, []string{"result"})
	for _, c := range []prometheus.Collector{requests, latency, expiry, reloads} {
		if err := reg.Register(c); err != nil {
			return Metrics{}, fmt.Errorf("identity: register metrics: %w", err)
		}
	}
	return Metrics{
		Requests:      kitprom.NewCounter(requests),
		Latency:       kitprom.NewHistogram(latency),
		IssuerExpiry:  kitprom.NewGauge(expiry),
		IssuerReloads: kitprom.NewCounter(reloads),
	}, nil
}
