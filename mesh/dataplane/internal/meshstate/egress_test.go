package meshstate

import (
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/opaqueroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
)

// staticPolicies answers each target's outbound policy once
// (staticSource, routenames_internal_test.go).
type staticPolicies = staticSource[*outbound.OutboundPolicy]

var egressNetwork = &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{
	Group: "policy.linkerd.io", Kind: "EgressNetwork", Namespace: "shop", Name: "egress"}}}

// egressHTTPPolicy is an EgressNetwork's policy whose one HTTP route
// forwards to addr, with a failure injector of the given status when it
// is not 0 (route.Compile refuses a status outside 100-599).
func egressHTTPPolicy(addr netip.AddrPort, status uint32) *outbound.OutboundPolicy {
	fwd := &outbound.Backend{Metadata: egressNetwork, Kind: &outbound.Backend_Forward{Forward: &pdst.WeightedAddr{
		Addr: &pnet.TcpAddress{Ip: &pnet.IPAddress{Ip: &pnet.IPAddress_Ipv4{Ipv4: ipv4(addr.Addr())}}, Port: uint32(addr.Port())}, Weight: 1}}}
	rule := &outbound.HttpRoute_Rule{
		Matches: []*httproute.HttpRouteMatch{{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}}},
		Backends: &outbound.HttpRoute_Distribution{Kind: &outbound.HttpRoute_Distribution_FirstAvailable_{
			FirstAvailable: &outbound.HttpRoute_Distribution_FirstAvailable{Backends: []*outbound.HttpRoute_RouteBackend{{Backend: fwd}}}}},
	}
	if status != 0 {
		rule.Filters = []*outbound.HttpRoute_Filter{{Kind: &outbound.HttpRoute_Filter_FailureInjector{
			FailureInjector: &httproute.HttpFailureInjector{Status: status, Message: "traffic not allowed"}}}}
	}
	return detectPolicy(egressNetwork, &outbound.HttpRoute{Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "http-egress"}}, Rules: []*outbound.HttpRoute_Rule{rule}})
}

func ipv4(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// opaqueRoutes is one opaque route whose one rule has the filters given.
func opaqueRoutes(filters ...*outbound.OpaqueRoute_Filter) []*outbound.OpaqueRoute {
	return []*outbound.OpaqueRoute{{
		Metadata: &meta.Metadata{Kind: &meta.Metadata_Default{Default: "opaque-egress"}},
		Rules:    []*outbound.OpaqueRoute_Rule{{Filters: filters}},
	}}
}

// egressOpaquePolicy is an EgressNetwork's policy of the Opaque protocol.
func egressOpaquePolicy(filters ...*outbound.OpaqueRoute_Filter) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Metadata: egressNetwork, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Opaque_{
		Opaque: &outbound.ProxyProtocol_Opaque{Routes: opaqueRoutes(filters...)}}}}
}

// egressDetectPolicy is an EgressNetwork's policy of the Detect protocol
// whose opaque fallback has the filters given.
func egressDetectPolicy(filters ...*outbound.OpaqueRoute_Filter) *outbound.OutboundPolicy {
	p := detectPolicy(egressNetwork)
	p.GetProtocol().GetDetect().Opaque = &outbound.ProxyProtocol_Opaque{Routes: opaqueRoutes(filters...)}
	return p
}

var (
	forbidden = &outbound.OpaqueRoute_Filter{Kind: &outbound.OpaqueRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}
	invalid   = &outbound.OpaqueRoute_Filter{Kind: &outbound.OpaqueRoute_Filter_Invalid{Invalid: &opaqueroute.Invalid{Message: "unreadable backend"}}}
)

// requireReleased checks that nobody holds the egress destination of
// target any more: with no user, the janitor drops it (its context ends).
// A destination still held is never dropped and the test fails at the
// guard.
func requireReleased(t *testing.T, h *harness, target string) {
	t.Helper()
	d := h.st.Destinations().Fixed(egressKey+target, target, nil, nil)
	require.NotNil(t, d)
	require.True(t, d.Ext.Egress(), "the destination EgressDest made (kept under its key)")
	d.Release() // the use Fixed just added
	stop := h.janitor()
	released := ended(d.Context())
	stop()
	require.True(t, released, "EgressDest released the destination it did not return")
}

var egressAddr = netip.MustParseAddrPort("203.0.113.7:443")

// A target whose policy is not an EgressNetwork's (Linkerd's fallback,
// or no policy) is forwarded as is: EgressDest returns nil and releases
// the destination it made.
func TestEgressDestIsNilWithoutAnEgressNetwork(t *testing.T) {
	fallback := detectPolicy(&meta.Metadata{Kind: &meta.Metadata_Default{Default: "egress-fallback"}})
	for what, pols := range map[string]staticPolicies{
		"the fallback policy": {egressAddr.String(): fallback},
		"no policy":           {},
	} {
		t.Run(what, func(t *testing.T) {
			h := newHarness(t, Settings{OutPolicies: pols, DestIdle: 1})
			d, err := h.st.EgressDest(h.ctx, egressAddr.String(), egressAddr)
			require.NoError(t, err)
			require.Nil(t, d)
			requireReleased(t, h, egressAddr.String())
		})
	}
}

// An EgressNetwork policy route.Compile refuses refuses the connection
// (fail closed): an error naming the target, and no destination held.
func TestEgressDestRefusesAnEgressNetworkPolicyItCannotRead(t *testing.T) {
	pols := staticPolicies{egressAddr.String(): egressHTTPPolicy(egressAddr, 999)}
	h := newHarness(t, Settings{OutPolicies: pols, DestIdle: 1})
	d, err := h.st.EgressDest(h.ctx, egressAddr.String(), egressAddr)
	require.Error(t, err)
	assert.Nil(t, d)
	assert.Contains(t, err.Error(), egressAddr.String(), "the error names the target")
	assert.Contains(t, err.Error(), "EgressNetwork", "the error says which policy could not be read")
	requireReleased(t, h, egressAddr.String())
}

// An EgressNetwork policy the proxy can read gives an egress destination
// whose one endpoint is the original destination.
func TestEgressDestFollowsAnEgressNetworkPolicy(t *testing.T) {
	pols := staticPolicies{egressAddr.String(): egressHTTPPolicy(egressAddr, 403)}
	h := newHarness(t, Settings{OutPolicies: pols})
	d, err := h.st.EgressDest(h.ctx, egressAddr.String(), egressAddr)
	require.NoError(t, err)
	require.NotNil(t, d)
	defer d.Release()
	assert.True(t, d.Ext.Egress())
	assert.Equal(t, egressAddr.String(), d.Target())
	require.Len(t, d.Set().Endpoints(), 1)
	assert.Equal(t, endpoint.Endpoint{Addr: egressAddr}, d.Set().Endpoints()[0].Endpoint, "plaintext to the original destination")
	assert.False(t, h.st.EgressOpaque(h.ctx, d), "an HTTP policy is not opaque")
	assert.False(t, h.st.EgressRefusesOpaque(h.ctx, d, slog.New(slog.DiscardHandler)), "no opaque route, nothing forbidden")

	again, err := h.st.EgressDest(h.ctx, egressAddr.String(), egressAddr)
	require.NoError(t, err)
	defer again.Release()
	assert.Same(t, d, again, "one egress destination per target")

	h.st.Service(h.ctx, d).RouteSeries("http-egress")
	assert.Equal(t, []string{"EgressNetwork"}, h.labelValues(t, "route_request_total", "parent_kind"), "the route series name the EgressNetwork")
	assert.Equal(t, []string{"egress"}, h.labelValues(t, "route_request_total", "parent_name"))
}

// EgressRefusesOpaque refuses, and counts, opaque traffic whose policy's
// first opaque rule has a Forbidden (or Invalid) filter, and nothing
// else.
func TestEgressRefusesOpaqueTrafficItsPolicyForbids(t *testing.T) {
	cases := []struct {
		what            string
		pol             *outbound.OutboundPolicy
		refused, opaque bool
	}{
		{"an opaque route with a Forbidden filter", egressOpaquePolicy(forbidden), true, true},
		{"Detect's opaque fallback with a Forbidden filter", egressDetectPolicy(forbidden), true, false},
		{"an opaque route with an Invalid filter", egressOpaquePolicy(invalid), true, true},
		{"an opaque route without filters", egressOpaquePolicy(), false, true},
		{"Detect's opaque fallback without filters", egressDetectPolicy(), false, false},
	}
	pols := staticPolicies{}
	target := func(i int) string { return fmt.Sprintf("203.0.113.%d:5432", i+1) }
	for i, c := range cases {
		pols[target(i)] = c.pol
	}
	h := newHarness(t, Settings{OutPolicies: pols})
	refusedLabels := map[string]string{"direction": "outbound", "reason": RefuseForbidden}
	want := 0.0
	for i, c := range cases {
		addr := netip.MustParseAddrPort(target(i))
		d, err := h.st.EgressDest(h.ctx, target(i), addr)
		require.NoError(t, err, c.what)
		require.NotNil(t, d, c.what)
		assert.Equal(t, c.opaque, h.st.EgressOpaque(h.ctx, d), "%s: opaque (no HTTP detection)", c.what)
		assert.Equal(t, c.refused, h.st.EgressRefusesOpaque(h.ctx, d, slog.New(slog.DiscardHandler)), c.what)
		if c.refused {
			want++
		}
		assert.Equal(t, want, h.counter(t, "tcp_refused_total", refusedLabels), "%s: tcp_refused_total", c.what)
		d.Release()
	}
}

// An EgressNetwork policy that becomes unreadable refuses new connections
// although the Service keeps its last good router (which may forward):
// the check is made for each policy received, not once per destination.
// A readable policy lets connections through again.
func TestEgressDestRefusesOnceItsPolicyBecomesUnreadable(t *testing.T) {
	pols := newSource[string, *outbound.OutboundPolicy](t)
	h := newHarness(t, Settings{OutPolicies: pols})
	target := egressAddr.String()
	type result struct {
		d   *Destination
		err error
	}
	first := make(chan result, 1)
	go func() {
		d, err := h.st.EgressDest(h.ctx, target, egressAddr)
		first <- result{d, err}
	}()
	c := pols.next(t)
	st := c.open()
	st.send(t, egressHTTPPolicy(egressAddr, 0))
	r := <-first
	require.NoError(t, r.err)
	require.NotNil(t, r.d)
	svc := svcOf(r.d)
	good := svc.Router()
	r.d.Release()

	st.send(t, egressHTTPPolicy(egressAddr, 999))
	st.close()
	c = pols.next(t)
	assert.Same(t, good, svc.Router(), "the Service keeps its last good router")
	d, err := h.st.EgressDest(h.ctx, target, egressAddr)
	require.Error(t, err, "a connection under the unreadable policy is refused")
	assert.Nil(t, d)
	assert.Contains(t, err.Error(), target)

	c.settle(t, egressHTTPPolicy(egressAddr, 403))
	d, err = h.st.EgressDest(h.ctx, target, egressAddr)
	require.NoError(t, err, "a readable policy lets connections through again")
	require.NotNil(t, d)
	d.Release()
	requireReleased(t, h, target)
}
