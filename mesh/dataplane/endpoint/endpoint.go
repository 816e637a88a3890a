package endpoint

import "net/netip"

// ProtocolHint is what discovery knows about an endpoint's protocol.
type ProtocolHint string

// Protocol hints.
const (
	HintUnknown ProtocolHint = ""
	HintH2      ProtocolHint = "h2"
	HintOpaque  ProtocolHint = "opaque"
)

// Endpoint is one address a destination resolves to.
type Endpoint struct {
	// Addr is the endpoint's address (pod IP and application port).
	Addr netip.AddrPort
	// Identity is the identity the endpoint's proxy must present. Empty
	// means the endpoint is not meshed and gets plaintext.
	Identity string
	// Protocol is the discovery hint; HintOpaque skips protocol detection.
	Protocol ProtocolHint
	// OpaqueTransportPort, when set, is the port of the endpoint's inbound
	// proxy: the connection is dialled there and the transport header
	// carries the application port.
	OpaqueTransportPort uint16
	// Weight biases balancing; 0 counts as 1.
	Weight uint32
	// MetricLabels are discovery's labels of the endpoint (namespace,
	// service, pod, serviceaccount, the owning workload by kind, zone),
	// exported as dst_* labels on outbound metrics and as the destination
	// labels of tap events. Only the keys listed in the metrics reference
	// (docs/metrics.md) become labels. The proxy never modifies the map.
	MetricLabels map[string]string
}
