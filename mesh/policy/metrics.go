package policy

import (
	"github.com/go-kit/kit/metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftmesh/weft/mesh/internal/kitmetrics"
)

// Metrics are the instruments of the indexer and of the Inbound and
// Outbound servers, as go-kit interfaces so an embedder can back them with
// Prometheus (NewPrometheusMetrics) or anything else. Nil fields record
// nothing.
type Metrics struct {
	// RebuildSeconds observes how long each index build takes, in
	// seconds, by the Config's clock.
	RebuildSeconds metrics.Histogram
	// Streams is the number of open watch streams of the Inbound and
	// Outbound APIs together.
	Streams metrics.Gauge
	// GatewayAPIWatched is 1 while the cluster source holds the routes of
	// a Gateway API kind and 0 while it does not (its CRD is not
	// installed, not Established or the source is told not to watch it),
	// with the label resource naming the CRD
	// ("grpcroutes.gateway.networking.k8s.io"). Set by
	// mesh/policy/kubernetes.
	GatewayAPIWatched metrics.Gauge
}

// DiscardMetrics returns instruments that record nothing.
func DiscardMetrics() Metrics { return kitmetrics.Defaults(Metrics{}) }

// NewPrometheusMetrics creates the policy metrics and registers them with
// reg, all or none:
//
//	weft_policy_index_rebuild_seconds  histogram
//	weft_policy_watch_streams          gauge
//	weft_policy_gateway_api_watched    gauge {resource}
func NewPrometheusMetrics(reg prometheus.Registerer) (Metrics, error) {
	s := kitmetrics.New("policy")
	return kitmetrics.Register("policy", reg, s, Metrics{
		RebuildSeconds:    s.Histogram("index_rebuild_seconds", "Time to build the policy index from the objects of its source.", kitmetrics.SecondsBuckets()),
		Streams:           s.Gauge("watch_streams", "Watch streams of the Inbound and Outbound policy APIs open now."),
		GatewayAPIWatched: s.Gauge("gateway_api_watched", "1 while the routes of the Gateway API CRD named by resource are watched, 0 while they are not (CRD missing, not Established, or watching turned off).", "resource"),
	})
}
