package discovery

import (
	"fmt"

	"github.com/go-kit/kit/metrics"
	"github.com/go-kit/kit/metrics/discard"
	kitprom "github.com/go-kit/kit/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the instruments of the index and the Destination server, as
// go-kit interfaces so an embedder can back them with Prometheus
// (NewPrometheusMetrics) or anything else. Nil fields record nothing.
type Metrics struct {
	// Subscriptions is the number of open subscriptions, by "kind":
	// endpoints or profile.
	Subscriptions metrics.Gauge
	// Topics is the number of shared watches (one per watched
	// destination), by "kind".
	Topics metrics.Gauge
	// Snapshots counts snapshots published to topics, by "kind".
	Snapshots metrics.Counter
	// Rejected counts objects the index refused or could not translate,
	// by "kind" (Service, EndpointSlice, Pod, Namespace, ServiceProfile).
	Rejected metrics.Counter
	// Messages counts messages sent to proxies, by "method": Get or
	// GetProfile.
	Messages metrics.Counter
}

// DiscardMetrics returns instruments that record nothing.
func DiscardMetrics() Metrics { return Metrics{}.withDefaults() }

func (m Metrics) withDefaults() Metrics {
	if m.Subscriptions == nil {
		m.Subscriptions = discard.NewGauge()
	}
	if m.Topics == nil {
		m.Topics = discard.NewGauge()
	}
	if m.Snapshots == nil {
		m.Snapshots = discard.NewCounter()
	}
	if m.Rejected == nil {
		m.Rejected = discard.NewCounter()
	}
	if m.Messages == nil {
		m.Messages = discard.NewCounter()
	}
	return m
}

// NewPrometheusMetrics creates the discovery metrics and registers them
// with reg:
//
//	weft_discovery_subscriptions{kind}              gauge
//	weft_discovery_topics{kind}                     gauge
//	weft_discovery_snapshots_published_total{kind}  counter
//	weft_discovery_objects_rejected_total{kind}     counter
//	weft_discovery_messages_sent_total{method}      counter
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	subs := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "weft", Subsystem: "discovery", Name: "subscriptions",
		Help: "Open subscriptions by kind (endpoints, profile).",
	}, []string{"kind"})
	topics := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "weft", Subsystem: "discovery", Name: "topics",
		Help: "Shared watches, one per watched destination, by kind.",
	}, []string{"kind"})
	snaps := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "weft", Subsystem: "discovery", Name: "snapshots_published_total",
		Help: "Snapshots published to shared watches, by kind.",
	}, []string{"kind"})
	rejected := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "weft", Subsystem: "discovery", Name: "objects_rejected_total",
		Help: "Objects refused or not translatable, by object kind.",
	}, []string{"kind"})
	msgs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "weft", Subsystem: "discovery", Name: "messages_sent_total",
		Help: "Messages sent to proxies, by method.",
	}, []string{"method"})
	for _, c := range []prometheus.Collector{subs, topics, snaps, rejected, msgs} {
		if err := reg.Register(c); err != nil {
			return Metrics{}, fmt.Errorf("discovery: register metrics: %w", err)
		}
	}
	return Metrics{
		Subscriptions: kitprom.NewGauge(subs),
		Topics:        kitprom.NewGauge(topics),
		Snapshots:     kitprom.NewCounter(snaps),
		Rejected:      kitprom.NewCounter(rejected),
		Messages:      kitprom.NewCounter(msgs),
	}, nil
}
