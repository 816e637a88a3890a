package dataplane_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/internal/testutil"
)

// egressPolicy is an EgressNetwork's policy for 127.0.0.1:port whose one
// HTTP route forwards there, with a failure injector of the given status
// when it is not 0.
func egressPolicy(port uint16, status uint32) *outbound.OutboundPolicy {
	md := &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
		Group: "policy.linkerd.io", Kind: "EgressNetwork", Namespace: "shop", Name: "egress", Port: uint32(port)}}}
	fwd := &outbound.Backend{Metadata: md, Kind: &outbound.Backend_Forward{Forward: &destination.WeightedAddr{
		Addr: &pnet.TcpAddress{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: 0x7f000001}}, Port: uint32(port)}, Weight: 1}}}
	rule := &outbound.HttpRoute_Rule{
		Matches: []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}},
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: fwd}}}}},
	}
	if status != 0 {
		rule.Filters = []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{
			FailureInjector: &httproute.HttpFailureInjector{Status: status, Message: "traffic not allowed"}}}}
	}
	routes := []*outbound.HttpRoute{{Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "http-egress"}}, Rules: []*outbound.HttpRoute_Rule{rule}}}
	return &outbound.OutboundPolicy{Metadata: md, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: durationpb.New(10 * time.Second),
		Http1:   &outbound.ProxyProtocol_Http1{Routes: routes},
		Http2:   &outbound.ProxyProtocol_Http2{Routes: routes},
	}}}}
}

// An EgressNetwork policy the proxy cannot read (here a failure injector
// with a status outside 100-599) must not leave the last router, which
// may forward, in charge of new connections: they are refused (BAD-INPUTS
// A8, fail closed). A readable policy lets them through again.
func TestAnEgressNetworkPolicyTheProxyCannotReadRefusesNewConnections(t *testing.T) {
	app := startHTTPApp(t)
	target := fmt.Sprintf("127.0.0.1:%d", app.port())
	o := startOutboundOnly(t, target)
	fresh := func() (*http.Response, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get(o.url("/"))
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	o.outbound.Set(target, egressPolicy(app.port(), 0))
	resp, err := fresh()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a readable Allow policy forwards")
	served := app.requests.Load()
	require.Equal(t, int32(1), served)

	o.outbound.Set(target, egressPolicy(app.port(), 999))
	testutil.Eventually(t, 10*time.Second, func() bool {
		_, err := fresh()
		return err != nil
	}, "a connection under the unreadable policy is closed")
	// The update reaches the proxy in its own time: connections made
	// before it took effect may have been forwarded. From the first one
	// refused on, none is.
	served = app.requests.Load()
	for range 3 {
		_, err := fresh()
		require.Error(t, err, "a connection under the unreadable policy")
	}
	assert.Equal(t, served, app.requests.Load(), "nothing reached the destination after the policy became unreadable")

	o.outbound.Set(target, egressPolicy(app.port(), 403))
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, err := fresh()
		return err == nil && resp.StatusCode == http.StatusForbidden
	}, "a readable Deny policy answers 403")
}
