package viz_test

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	netpb "github.com/weftmesh/weft/apis/proxy/net"
	tappb "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/viz"
)

func tcp(ip uint32, port uint32) *netpb.TcpAddress {
	return &netpb.TcpAddress{Ip: &netpb.IPAddress{Ip: &netpb.IPAddress_Ipv4{Ipv4: ip}}, Port: port}
}

func TestEventFromProtoDecodesEachPhaseAndNamesKnownPeers(t *testing.T) {
	web := webPod
	web.IP = netip.MustParseAddr("127.0.1.3")
	ix := viz.NewAddresses([]viz.Target{web, apiPod})
	id := &tappb.TapEvent_Http_StreamId{Base: 9, Stream: 2}
	base := func(h *tappb.TapEvent_Http) *tappb.TapEvent {
		ev := &tappb.TapEvent{
			Source: tcp(0x7f000103, 40000), Destination: tcp(0x7f000102, 8080),
			SourceMeta:     &tappb.TapEvent_EndpointMeta{Labels: map[string]string{"tls": "true", "client_id": webID, "pod": "liar"}},
			ProxyDirection: tappb.TapEvent_INBOUND,
			Event:          &tappb.TapEvent_Http_{Http: h},
		}
		// What goes over the wire is what is decoded.
		b, err := proto.Marshal(ev)
		require.NoError(t, err)
		out := &tappb.TapEvent{}
		require.NoError(t, proto.Unmarshal(b, out))
		return out
	}
	req, err := viz.EventFromProto(apiPod, base(&tappb.TapEvent_Http{Event: &tappb.TapEvent_Http_RequestInit_{RequestInit: &tappb.TapEvent_Http_RequestInit{
		Id: id, Method: &httptypes.HttpMethod{Type: &httptypes.HttpMethod_Registered_{Registered: httptypes.HttpMethod_POST}},
		Authority: "api:8080", Path: "/items?x=1",
	}}}), ix)
	require.NoError(t, err)
	assert.Equal(t, viz.RequestInit, req.Kind)
	assert.Equal(t, "inbound", req.Direction)
	assert.Equal(t, "shop/api-0", req.Proxy)
	assert.Equal(t, "POST", req.Method)
	assert.Equal(t, netip.MustParseAddrPort("127.0.1.3:40000"), req.Source)
	assert.Equal(t, "web", req.SourceMeta["deployment"], "the peer is named from its address")
	assert.Equal(t, "liar", req.SourceMeta["pod"], "labels the proxy sent are kept")
	assert.True(t, req.TLS())
	assert.Equal(t, uint64(2), req.Stream)

	end, err := viz.EventFromProto(apiPod, base(&tappb.TapEvent_Http{Event: &tappb.TapEvent_Http_ResponseEnd_{ResponseEnd: &tappb.TapEvent_Http_ResponseEnd{
		Id: id, SinceRequestInit: durationpb.New(3 * time.Millisecond), SinceResponseInit: durationpb.New(time.Millisecond),
		ResponseBytes: 42, Eos: &tappb.Eos{End: &tappb.Eos_GrpcStatusCode{GrpcStatusCode: 14}},
	}}}), ix)
	require.NoError(t, err)
	assert.Equal(t, viz.ResponseEnd, end.Kind)
	assert.Equal(t, 3*time.Millisecond, end.SinceRequest)
	require.NotNil(t, end.GRPCStatus)
	assert.Equal(t, uint32(14), *end.GRPCStatus)
	assert.False(t, viz.Success(200, end))

	_, err = viz.EventFromProto(apiPod, &tappb.TapEvent{}, ix)
	assert.ErrorIs(t, err, viz.ErrNotHTTP)
}

func TestObserveRequestMatchesAllFilterParts(t *testing.T) {
	r := viz.ObserveRequest(viz.TapRequest{Filter: viz.Filter{Method: "get", Authority: "api:8080", PathPrefix: "/items"}, Limit: 100, Headers: true})
	assert.Equal(t, uint32(100), r.GetLimit())
	ms := r.GetMatch().GetAll().GetMatches()
	require.Len(t, ms, 3)
	assert.Equal(t, httptypes.HttpMethod_GET, ms[0].GetHttp().GetMethod().GetRegistered())
	assert.Equal(t, "api:8080", ms[1].GetHttp().GetAuthority().GetExact())
	assert.Equal(t, "/items", ms[2].GetHttp().GetPath().GetPrefix())
	assert.NotNil(t, r.GetExtract().GetHttp().GetHeaders())
	assert.Empty(t, viz.ObserveRequest(viz.TapRequest{}).GetMatch().GetAll().GetMatches(), "no filter: an empty conjunction matches everything")
	assert.Equal(t, uint32(math.MaxUint32), viz.ObserveRequest(viz.TapRequest{}).GetLimit(), "no limit is sent as the largest: proxies refuse 0")
}

func TestEventFromProtoNamesAPeerAtAnUnknownAddressByItsVerifiedIdentity(t *testing.T) {
	web2 := webPod
	web2.Pod = "web-1"
	// A peer that shares its identity with another workload stays unnamed:
	// the identity does not say which one it is.
	shared := viz.Target{Namespace: "shop", Pod: "job-0", WorkloadKind: "deployment", Workload: "job", Identity: intruderID}
	also := viz.Target{Namespace: "shop", Pod: "cron-0", WorkloadKind: "deployment", Workload: "cron", Identity: intruderID}
	ix := viz.NewAddresses([]viz.Target{webPod, web2, apiPod, shared, also})
	ev := func(clientID string) *tappb.TapEvent {
		return &tappb.TapEvent{
			Source: tcp(0x7f000001, 40000), Destination: tcp(0x7f000102, 8080),
			SourceMeta:     &tappb.TapEvent_EndpointMeta{Labels: map[string]string{"tls": "true", "client_id": clientID}},
			ProxyDirection: tappb.TapEvent_INBOUND,
			Event: &tappb.TapEvent_Http_{Http: &tappb.TapEvent_Http{Event: &tappb.TapEvent_Http_RequestInit_{RequestInit: &tappb.TapEvent_Http_RequestInit{
				Id: &tappb.TapEvent_Http_StreamId{Base: 1, Stream: 1}}}}},
		}
	}
	e, err := viz.EventFromProto(apiPod, ev(webID), ix)
	require.NoError(t, err)
	assert.Equal(t, "web", e.SourceMeta["deployment"], "127.0.0.1 is no pod's; the verified identity is web's")
	assert.Equal(t, "shop", e.SourceMeta["namespace"])
	assert.NotContains(t, e.SourceMeta, "pod", "web has two pods: which one is not known")

	e, err = viz.EventFromProto(apiPod, ev(intruderID), ix)
	require.NoError(t, err)
	assert.NotContains(t, e.SourceMeta, "deployment")

	e, err = viz.EventFromProto(apiPod, ev("nobody.shop.serviceaccount.identity.weft.cluster.local"), ix)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"tls": "true", "client_id": "nobody.shop.serviceaccount.identity.weft.cluster.local"}, e.SourceMeta)
}
