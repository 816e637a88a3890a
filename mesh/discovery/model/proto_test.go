package model_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	pb "github.com/weftmesh/weft/apis/proxy/destination"
	pbnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/mesh/discovery/model"
	"google.golang.org/protobuf/proto"
)

func TestEndpointSurvivesTheWire(t *testing.T) {
	for _, e := range []model.Endpoint{
		{Addr: netip.MustParseAddrPort("10.0.0.1:8080"), Weight: 10000, Identity: "web.shop.serviceaccount.identity.weft.cluster.local",
			Hint: model.HintH2, Zone: "z1", MetricLabels: map[string]string{"pod": "web-1", "zone": "z1"}},
		{Addr: netip.MustParseAddrPort("[fd00::1:2]:3306"), Weight: 1, Identity: "db.shop.serviceaccount.identity.weft.cluster.local",
			Hint: model.HintOpaque, OpaqueTransportPort: 4143, AuthorityOverride: "db.example:3306"},
		{Addr: netip.MustParseAddrPort("192.168.0.9:80"), Weight: 10000},
	} {
		b, err := proto.Marshal(model.EndpointToProto(e))
		require.NoError(t, err)
		var wa pb.WeightedAddr
		require.NoError(t, proto.Unmarshal(b, &wa))
		got, err := model.EndpointFromProto(&wa)
		require.NoError(t, err)
		if len(e.MetricLabels) == 0 {
			got.MetricLabels = nil
		}
		assert.True(t, e.Equal(got), "%v != %v", e, got)
	}
}

func TestIdentitySetsBothStrategyAndServerName(t *testing.T) {
	wa := model.EndpointToProto(model.Endpoint{Addr: netip.MustParseAddrPort("10.0.0.1:80"), Identity: "a.b.serviceaccount.identity.weft.cluster.local"})
	assert.Equal(t, "a.b.serviceaccount.identity.weft.cluster.local", wa.GetTlsIdentity().GetDnsLikeIdentity().GetName())
	assert.Equal(t, "a.b.serviceaccount.identity.weft.cluster.local", wa.GetTlsIdentity().GetServerName().GetName())
	assert.Equal(t, uint32(0x0a000001), wa.GetAddr().GetIp().GetIpv4(), "IPv4 is big-endian in a fixed32")
	assert.Nil(t, wa.GetProtocolHint(), "no hint for an unmeshed endpoint")
}

func TestMalformedAddressesFromTheWireAreErrors(t *testing.T) {
	for _, a := range []*pbnet.TcpAddress{
		nil,
		{Port: 80},
		{Ip: &pbnet.IPAddress{}, Port: 80},
		{Ip: &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv4{Ipv4: 1}}, Port: 0},
		{Ip: &pbnet.IPAddress{Ip: &pbnet.IPAddress_Ipv4{Ipv4: 1}}, Port: 70000},
	} {
		_, err := model.TCPAddressFromProto(a)
		assert.Error(t, err, "%v", a)
	}
}

func TestProfileSurvivesTheWire(t *testing.T) {
	svc := model.ServiceID{Namespace: "shop", Name: "web"}
	p := model.Profile{
		FullyQualifiedName: "web.shop.svc.cluster.local",
		OpaqueProtocol:     true,
		Routes: []model.Route{{
			Name: "books",
			Condition: model.RequestMatch{All: []model.RequestMatch{
				{Method: "GET"}, {Method: "PURGE"}, {Not: &model.RequestMatch{PathRegex: "/x"}},
				{Any: []model.RequestMatch{{PathRegex: "/a"}}},
			}},
			ResponseClasses: []model.ResponseClass{{Condition: model.ResponseMatch{Any: []model.ResponseMatch{
				{Status: &model.StatusRange{Min: 500, Max: 599}}, {Not: &model.ResponseMatch{Status: &model.StatusRange{Min: 200}}},
			}}, IsFailure: true}},
			IsRetryable: true,
			Timeout:     250 * time.Millisecond,
		}},
		RetryBudget:  model.RetryBudget{RetryRatio: 0.5, MinRetriesPerSecond: 2, TTL: 5 * time.Second},
		DstOverrides: []model.WeightedDst{{Authority: "web-v2.shop.svc.cluster.local:80", Weight: 5000}},
		Service:      &svc,
		Port:         80,
		Source:       "shop/web.shop.svc.cluster.local",
	}
	b, err := proto.Marshal(model.ProfileToProto(p))
	require.NoError(t, err)
	var dp pb.DestinationProfile
	require.NoError(t, proto.Unmarshal(b, &dp))
	assert.Equal(t, p, model.ProfileFromProto(&dp))
	assert.Equal(t, "Service", dp.GetParentRef().GetResource().GetKind())
	assert.Equal(t, "ServiceProfile", dp.GetProfileRef().GetResource().GetKind())
}
