package meshstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/outbound"
)

// The route series of a Service are cached per route name and name the
// Service by what discovery says it is: the target until a profile
// names a Service, then that Service's canonical name.
func TestRouteSeriesNameTheServiceDiscoveryGives(t *testing.T) {
	const addr = "10.96.0.10:80"
	pros := newSource[string, *pdst.DestinationProfile](t)
	h := newHarness(t, Settings{Profiles: pros})
	d := h.fixed(t, addr)
	res := h.serviceAsync(d)
	st := pros.next(t).open()
	st.send(t, nil) // discovery has no profile for the address
	svc := await(t, res, "the first (empty) profile")

	rs := svc.RouteSeries("default")
	assert.Same(t, rs, svc.RouteSeries("default"), "one series per route, cached")
	assert.Equal(t, []string{addr}, h.labelValues(t, "route_request_total", "dst"), "no Service named: the target")

	st.send(t, serviceProfile(webFQN, "Service", "web", "shop", 80))
	st.close()
	pros.next(t)
	named := svc.RouteSeries("default")
	assert.NotSame(t, rs, named, "the series start over under the Service's name")
	assert.Same(t, named, svc.RouteSeries("default"))
	assert.Equal(t, []string{addr, webFQN + ":80"}, h.labelValues(t, "route_request_total", "dst"))
}

// tlsPolicy is a policy of the TLS protocol (no TLSRoute: every
// connection goes to the target).
func tlsPolicy() *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Tls_{Tls: &outbound.ProxyProtocol_Tls{}}}}
}

// A policy's stream routes are compiled once per policy received.
func TestStreamRoutesAreCompiledOncePerPolicy(t *testing.T) {
	pols := newSource[string, *outbound.OutboundPolicy](t)
	h := newHarness(t, Settings{OutPolicies: pols})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)
	st := pols.next(t).open()
	first := tlsPolicy()
	st.send(t, first)
	svc := await(t, res, "the first policy")

	pol, s1, err := svc.StreamRoutes()
	require.NoError(t, err)
	require.NotNil(t, s1)
	assert.True(t, s1.TLS)
	assert.Same(t, first, pol)
	_, again, _ := svc.StreamRoutes()
	assert.Same(t, s1, again, "the same policy is not compiled again")

	second := tlsPolicy()
	st.send(t, second)
	st.close()
	pols.next(t)
	pol, s2, err := svc.StreamRoutes()
	require.NoError(t, err)
	assert.Same(t, second, pol)
	assert.NotSame(t, s1, s2, "a new policy is compiled")
}
