package discovery

import (
	"net/netip"

	pb "github.com/weftmesh/weft/apis/proxy/destination"
	pbnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/mesh/discovery/model"
)

// The model and its proxy API conversions live in mesh/discovery/model,
// which links nothing of Kubernetes, so that the proxy's discovery client
// does not carry this package's translators. The names below keep this
// package's API as it was: each is the same type or function.

type (
	// ProtocolHint is model.ProtocolHint.
	ProtocolHint = model.ProtocolHint
	// Endpoint is model.Endpoint.
	Endpoint = model.Endpoint
	// EndpointSet is model.EndpointSet.
	EndpointSet = model.EndpointSet
	// Profile is model.Profile.
	Profile = model.Profile
	// RetryBudget is model.RetryBudget.
	RetryBudget = model.RetryBudget
	// WeightedDst is model.WeightedDst.
	WeightedDst = model.WeightedDst
	// Route is model.Route.
	Route = model.Route
	// RequestMatch is model.RequestMatch.
	RequestMatch = model.RequestMatch
	// ResponseClass is model.ResponseClass.
	ResponseClass = model.ResponseClass
	// ResponseMatch is model.ResponseMatch.
	ResponseMatch = model.ResponseMatch
	// StatusRange is model.StatusRange.
	StatusRange = model.StatusRange
	// ServiceID is model.ServiceID.
	ServiceID = model.ServiceID
	// ContextToken is model.ContextToken.
	ContextToken = model.ContextToken
)

// The protocol hints of model.
const (
	HintUnknown = model.HintUnknown
	HintH2      = model.HintH2
	HintOpaque  = model.HintOpaque
)

// NewEndpointSet is model.NewEndpointSet.
func NewEndpointSet(labels map[string]string, eps ...Endpoint) EndpointSet {
	return model.NewEndpointSet(labels, eps...)
}

// DefaultRetryBudget is model.DefaultRetryBudget.
func DefaultRetryBudget() RetryBudget { return model.DefaultRetryBudget() }

// ParseContextToken is model.ParseContextToken.
func ParseContextToken(s string) (ContextToken, error) { return model.ParseContextToken(s) }

// TCPAddressToProto is model.TCPAddressToProto.
func TCPAddressToProto(a netip.AddrPort) *pbnet.TcpAddress { return model.TCPAddressToProto(a) }

// TCPAddressFromProto is model.TCPAddressFromProto.
func TCPAddressFromProto(a *pbnet.TcpAddress) (netip.AddrPort, error) {
	return model.TCPAddressFromProto(a)
}

// EndpointToProto is model.EndpointToProto.
func EndpointToProto(e Endpoint) *pb.WeightedAddr { return model.EndpointToProto(e) }

// EndpointFromProto is model.EndpointFromProto.
func EndpointFromProto(wa *pb.WeightedAddr) (Endpoint, error) { return model.EndpointFromProto(wa) }

// ProfileToProto is model.ProfileToProto.
func ProfileToProto(p Profile) *pb.DestinationProfile { return model.ProfileToProto(p) }

// ProfileFromProto is model.ProfileFromProto.
func ProfileFromProto(dp *pb.DestinationProfile) Profile { return model.ProfileFromProto(dp) }
