package discovery

import (
	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
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
func DiscardMetrics() Metrics { return kitmetrics.Defaults(Metrics{}) }

// NewPrometheusMetrics creates the discovery metrics and registers them
// with reg, all or none:
//
//	weft_discovery_subscriptions{kind}              gauge
//	weft_discovery_topics{kind}                     gauge
//	weft_discovery_snapshots_published_total{kind}  counter
//	weft_discovery_objects_rejected_total{kind}     counter
//	weft_discovery_messages_sent_total{method}      counter
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	s := kitmetrics.New("discovery")
	return kitmetrics.Register("discovery", reg, s, Metrics{
		Subscriptions: s.Gauge("subscriptions", "Open subscriptions by kind (endpoints, profile).", "kind"),
		Topics:        s.Gauge("topics", "Shared watches, one per watched destination, by kind.", "kind"),
		Snapshots:     s.Counter("snapshots_published_total", "Snapshots published to shared watches, by kind.", "kind"),
		Rejected:      s.Counter("objects_rejected_total", "Objects refused or not translatable, by object kind.", "kind"),
		Messages:      s.Counter("messages_sent_total", "Messages sent to proxies, by method.", "method"),
	})
}
