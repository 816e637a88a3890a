package model

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"time"
)

// ProtocolHint tells a client proxy how the endpoint's side speaks.
type ProtocolHint uint8

const (
	// HintUnknown: the endpoint is not known to run a proxy.
	HintUnknown ProtocolHint = iota
	// HintH2: the endpoint's proxy accepts HTTP/2 and upgrades HTTP/1
	// requests carried over it.
	HintH2
	// HintOpaque: the endpoint's proxy treats this port as opaque TCP.
	HintOpaque
)

// String names the hint as the diagnostics table prints it.
func (h ProtocolHint) String() string {
	switch h {
	case HintH2:
		return "h2"
	case HintOpaque:
		return "opaque"
	default:
		return "unknown"
	}
}

// Endpoint is one address of a destination and what a client must know to
// connect to it.
type Endpoint struct {
	// Addr is the IP and port to connect to.
	Addr netip.AddrPort
	// Weight is the endpoint's share of load relative to its peers
	// (10000 by default).
	Weight uint32
	// Identity is the TLS identity the endpoint must present, such as
	// web.shop.serviceaccount.identity.weft.cluster.local. Empty means the
	// endpoint is not meshed and is reached without mTLS.
	Identity string
	// Hint says how the endpoint's proxy speaks.
	Hint ProtocolHint
	// OpaqueTransportPort, when not zero, is the inbound port of the
	// endpoint's proxy that accepts opaque traffic behind the transport
	// header.
	OpaqueTransportPort uint32
	// Zone is the topology zone of the endpoint, when known.
	Zone string
	// MetricLabels label the client proxy's metrics for this endpoint
	// (pod, serviceaccount, the owner such as deployment, zone). The map
	// is shared and must not be modified.
	MetricLabels map[string]string
	// AuthorityOverride, when set, replaces the authority of requests sent
	// to this endpoint.
	AuthorityOverride string
}

// Equal reports whether two endpoints carry the same information.
func (e Endpoint) Equal(o Endpoint) bool {
	return e.Addr == o.Addr && e.Weight == o.Weight && e.Identity == o.Identity &&
		e.Hint == o.Hint && e.OpaqueTransportPort == o.OpaqueTransportPort &&
		e.Zone == o.Zone && e.AuthorityOverride == o.AuthorityOverride &&
		sameLabels(e.MetricLabels, o.MetricLabels)
}

// sameLabels compares label maps, first by identity: translation shares
// one map between all endpoints of a pod, so most comparisons end there.
func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		return true
	}
	return maps.Equal(a, b)
}

// EndpointSet is what a destination resolves to at one moment. Values
// published by a Source are immutable.
type EndpointSet struct {
	// Exists is false when the destination is unknown (no such service,
	// or an IP that is neither a cluster IP nor a pod). A set that does not
	// exist has no endpoints.
	Exists bool
	// Endpoints are sorted by address, without duplicates.
	Endpoints []Endpoint
	// MetricLabels label every endpoint of the set (namespace, service).
	MetricLabels map[string]string
}

// Equal reports whether two sets carry the same information.
func (s EndpointSet) Equal(o EndpointSet) bool {
	return s.Exists == o.Exists && maps.Equal(s.MetricLabels, o.MetricLabels) &&
		slices.EqualFunc(s.Endpoints, o.Endpoints, Endpoint.Equal)
}

// Lookup finds the endpoint with address a.
func (s EndpointSet) Lookup(a netip.AddrPort) (Endpoint, bool) {
	i, ok := slices.BinarySearchFunc(s.Endpoints, a, func(e Endpoint, a netip.AddrPort) int { return e.Addr.Compare(a) })
	if !ok {
		return Endpoint{}, false
	}
	return s.Endpoints[i], true
}

// NewEndpointSet builds a set that exists from endpoints in any order;
// for duplicate addresses the first one wins.
func NewEndpointSet(labels map[string]string, eps ...Endpoint) EndpointSet {
	out := make([]Endpoint, len(eps))
	copy(out, eps)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Addr.Compare(out[j].Addr) < 0 })
	out = slices.CompactFunc(out, func(a, b Endpoint) bool { return a.Addr == b.Addr })
	return EndpointSet{Exists: true, Endpoints: out, MetricLabels: labels}
}

// Profile is how clients should treat requests to a destination: routes
// with their classification, retries and timeouts, traffic split, and
// whether the destination is opaque TCP.
type Profile struct {
	// FullyQualifiedName is the service's name, such as
	// web.shop.svc.cluster.local, when the destination is a service.
	FullyQualifiedName string
	// OpaqueProtocol says connections to this destination are opaque TCP;
	// HTTP routes are then ignored.
	OpaqueProtocol bool
	// Routes are tried in order; the first whose condition matches a
	// request names it.
	Routes []Route
	// RetryBudget bounds retries on retryable routes.
	RetryBudget RetryBudget
	// DstOverrides, when not empty, split traffic between other authorities.
	DstOverrides []WeightedDst
	// Endpoint is set when the destination is a single known endpoint (a
	// pod IP, or a pod's hostname); traffic split and balancing are then
	// skipped.
	Endpoint *Endpoint
	// Service is the Service the profile belongs to, when there is one.
	Service *ServiceID
	// Port is the destination port.
	Port uint32
	// Source names the ServiceProfile the profile came from
	// (namespace/name), empty for the default profile.
	Source string
}

// RetryBudget bounds retries as a ratio of original requests, with a floor.
type RetryBudget struct {
	RetryRatio          float32
	MinRetriesPerSecond uint32
	TTL                 time.Duration
}

// DefaultRetryBudget is the budget of a destination without a
// ServiceProfile, the same as Linkerd's: 20% more load, at least 10
// retries per second, counted over 10 seconds.
func DefaultRetryBudget() RetryBudget {
	return RetryBudget{RetryRatio: 0.2, MinRetriesPerSecond: 10, TTL: 10 * time.Second}
}

// WeightedDst is an authority that receives a share of a destination's
// traffic. Weights are in ten-thousandths: 10000 is a weight of 1.
type WeightedDst struct {
	Authority string
	Weight    uint32
}

// Route is one route of a profile.
type Route struct {
	// Name labels the route's metrics ("route").
	Name            string
	Condition       RequestMatch
	ResponseClasses []ResponseClass
	IsRetryable     bool
	// Timeout bounds each request; zero means none set.
	Timeout time.Duration
}

// RequestMatch is a condition on a request. Exactly one field is set.
type RequestMatch struct {
	All       []RequestMatch
	Any       []RequestMatch
	Not       *RequestMatch
	PathRegex string
	Method    string
}

// ResponseClass classifies the responses its condition matches.
type ResponseClass struct {
	Condition ResponseMatch
	IsFailure bool
}

// ResponseMatch is a condition on a response. Exactly one field is set.
type ResponseMatch struct {
	All    []ResponseMatch
	Any    []ResponseMatch
	Not    *ResponseMatch
	Status *StatusRange
}

// StatusRange is an inclusive range of HTTP status codes; a zero bound is
// open.
type StatusRange struct {
	Min, Max uint32
}

// ServiceID names a Kubernetes Service.
type ServiceID struct {
	Namespace string
	Name      string
}

// String formats the ID as namespace/name.
func (id ServiceID) String() string { return id.Namespace + "/" + id.Name }
