package meshstate

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

const (
	target = "web.shop.svc.cluster.local:80"
	webFQN = "web.shop.svc.cluster.local"
)

// httpPolicy is a Service's policy whose one HTTP route, named name
// (httproute/shop/NAME), takes every request to the target.
func httpPolicy(name string) *outbound.OutboundPolicy {
	return detectPolicy(&meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "Service", Namespace: "shop", Name: "web", Port: 80}}},
		&outbound.HttpRoute{
			Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "HTTPRoute", Namespace: "shop", Name: name}}},
			Rules: []*outbound.HttpRoute_Rule{{Matches: []*httproute.HttpRouteMatch{
				{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Prefix{Prefix: "/"}}},
			}}},
		})
}

// badPolicy is a policy route.Compile refuses: its one route's path
// regex does not parse (route's TestCompileRefusesWhatItCannotFullyRead).
func badPolicy() *outbound.OutboundPolicy {
	return detectPolicy(nil, &outbound.HttpRoute{
		Metadata: &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "HTTPRoute", Namespace: "shop", Name: "bad"}}},
		Rules: []*outbound.HttpRoute_Rule{{Matches: []*httproute.HttpRouteMatch{
			{Path: &httproute.PathMatch{Kind: &httproute.PathMatch_Regex{Regex: "(["}}},
		}}},
	})
}

func detectPolicy(md *meta.Metadata, routes ...*outbound.HttpRoute) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Metadata: md, Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Detect_{Detect: &outbound.ProxyProtocol_Detect{
		Timeout: durationpb.New(10 * time.Second),
		Http1:   &outbound.ProxyProtocol_Http1{Routes: routes},
		Http2:   &outbound.ProxyProtocol_Http2{Routes: routes},
	}}}}
}

// routeOf is the route a GET / to the target takes under s's router.
func routeOf(s *Service) *route.Route {
	return s.Router().Select(route.Request{Method: "GET", Path: "/", Host: webFQN, Header: http.Header{}})
}

// requireDefault checks that s routes by default: everything to the
// target, on the default route.
func requireDefault(t *testing.T, s *Service, msg string) {
	t.Helper()
	rt := routeOf(s)
	require.Equal(t, route.DefaultName, rt.Name, msg)
	require.Len(t, rt.Backends, 1, msg)
	require.Equal(t, s.target, rt.Backends[0].Authority, msg)
}

// A source that never answers holds a Service for the resolve timeout
// only: it then routes by default, and takes the answers when they come.
func TestServiceRoutesByDefaultWhenNoAnswerComesInTime(t *testing.T) {
	pols, pros := newSource[string, *outbound.OutboundPolicy](t), newSource[string, *pdst.DestinationProfile](t)
	h := newHarness(t, Settings{OutPolicies: pols, Profiles: pros, ResolveTimeout: 20 * time.Millisecond})
	d := h.fixed(t, target)

	svc := await(t, h.serviceAsync(d), "no answer, past the resolve timeout") // neither Watch call is answered
	assert.False(t, isReady(svc), "Service returned on the resolve timeout, with no answer")
	requireDefault(t, svc, "past the resolve timeout the Service routes by default")
	assert.Same(t, svc, h.st.Service(h.ctx, d), "one Service per destination")

	pols.next(t).settle(t, httpPolicy("web"))
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name, "a policy that comes late is applied")
	assert.False(t, isReady(svc), "still no profile")
	pros.next(t).settle(t, serviceProfile(webFQN, "Service", "web", "shop", 80))
	assert.True(t, isReady(svc), "a late policy and profile make the Service ready")
	assert.Equal(t, webFQN+":80", svc.Names().Canonical, "a profile that comes late is applied")
}

// Service waits for both the first policy and the first profile, in
// either order, and no longer.
func TestServiceWaitsForThePolicyAndTheProfile(t *testing.T) {
	for _, policyFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("policy first %v", policyFirst), func(t *testing.T) {
			pols, pros := newSource[string, *outbound.OutboundPolicy](t), newSource[string, *pdst.DestinationProfile](t)
			h := newHarness(t, Settings{OutPolicies: pols, Profiles: pros})
			d := h.fixed(t, target)
			res := h.serviceAsync(d)

			polCall, proCall := pols.next(t), pros.next(t)
			svc := svcOf(d)
			require.NotNil(t, svc)
			if policyFirst {
				polCall.settle(t, httpPolicy("web"))
				assert.Equal(t, "httproute/shop/web", routeOf(svc).Name, "the policy is applied as it comes")
			} else {
				proCall.settle(t, serviceProfile(webFQN, "Service", "web", "shop", 80))
				assert.Equal(t, webFQN+":80", svc.Names().Canonical, "the profile is applied as it comes")
			}
			assert.False(t, isReady(svc), "one answer of two does not make the Service ready")
			assert.Empty(t, res, "Service is still waiting")

			if policyFirst {
				proCall.open().send(t, serviceProfile(webFQN, "Service", "web", "shop", 80))
			} else {
				polCall.open().send(t, httpPolicy("web"))
			}
			got := await(t, res, "after the policy and the profile")
			assert.Same(t, svc, got)
			assert.True(t, isReady(svc))
			assert.Equal(t, "httproute/shop/web", routeOf(got).Name)
			assert.Equal(t, webFQN+":80", got.Names().Canonical)
		})
	}
}

// A source whose first Watch fails (not NotFound) leaves nothing to keep:
// the Service routes by default at once, and the source is asked again.
func TestServiceRoutesByDefaultWhenTheFirstWatchFails(t *testing.T) {
	pols := newSource[string, *outbound.OutboundPolicy](t)
	h := newHarness(t, Settings{OutPolicies: pols})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)
	pols.next(t).fail(errors.New("policy controller unreachable"))
	svc := await(t, res, "a failed first watch must not hold the Service for the resolve timeout")
	assert.True(t, isReady(svc))
	requireDefault(t, svc, "a failed first watch routes by default")
	again := pols.next(t)
	assert.Equal(t, target, again.key, "the broken watch is asked again")
}

// A policy the router cannot compile is not applied: the last good router
// stays, and a refused first policy still makes the Service ready.
func TestAPolicyTheRouterCannotCompileIsNotApplied(t *testing.T) {
	pols := newSource[string, *outbound.OutboundPolicy](t)
	h := newHarness(t, Settings{OutPolicies: pols})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)

	c := pols.next(t)
	svc := svcOf(d)
	r0 := svc.Router()
	st := c.open()
	bad := badPolicy()
	st.send(t, bad)
	require.Same(t, svc, await(t, res, "a refused first policy must still complete readiness"))
	assert.True(t, isReady(svc))
	assert.Same(t, r0, svc.Router(), "the refused policy left the default router in place")
	requireDefault(t, svc, "a refused first policy routes by default")
	assert.Same(t, bad, svc.Policy(), "the policy is recorded as received (EgressDest reads it)")

	good := httpPolicy("web")
	st.send(t, good)
	st.close()
	c = pols.next(t)
	r1 := svc.Router()
	assert.NotSame(t, r0, r1)
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name)

	c.settle(t, badPolicy())
	assert.Same(t, r1, svc.Router(), "a refused policy keeps the last good router")
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name)
}

// A broken watch keeps the last policy and is watched again; a source
// that knows nothing of the target (NotFound) publishes none: the router
// goes back to the default.
func TestABrokenWatchKeepsTheLastPolicyAndNotFoundPublishesNone(t *testing.T) {
	pols := newSource[string, *outbound.OutboundPolicy](t)
	h := newHarness(t, Settings{OutPolicies: pols})
	d := h.fixed(t, target)
	res := h.serviceAsync(d)

	good := httpPolicy("web")
	c := pols.next(t).settle(t, good) // the stream ends: a second Watch call
	svc := await(t, res, "the first policy")
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name, "the stream's end keeps the last policy")
	assert.Same(t, good, svc.Policy())

	c.fail(errors.New("policy controller unreachable"))
	c = pols.next(t)
	assert.Equal(t, target, c.key, "a failed Watch is asked again")
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name, "a failed Watch keeps the last policy")
	assert.Same(t, good, svc.Policy())

	c.fail(fmt.Errorf("%w: %s", errNotFound, target))
	c = pols.next(t) // after NotFound's backoff (2.5 to 5 s)
	assert.Equal(t, target, c.key, "NotFound is asked again")
	requireDefault(t, svc, "NotFound routes by default")
	assert.Nil(t, svc.Policy(), "NotFound publishes no policy")

	c.settle(t, good)
	assert.Equal(t, "httproute/shop/web", routeOf(svc).Name, "a policy after NotFound is applied")
}

// A Service keeps at most maxBackends distinct backends; the same spec
// returns the same backend, and a refused one resolves nothing.
func TestBackendsAreBoundedPerService(t *testing.T) {
	res := &resolver{}
	h := newHarness(t, Settings{Resolver: res})
	d := h.fixed(t, target)
	svc := h.st.Service(h.ctx, d)
	require.True(t, isReady(svc), "without sources a Service is ready at once")

	const api = "api.shop.svc.cluster.local:80"
	first, err := svc.Backend(h.ctx, route.Backend{Name: api, Authority: api}, nil)
	require.NoError(t, err)
	again, err := svc.Backend(h.ctx, route.Backend{Name: api, Authority: api}, nil)
	require.NoError(t, err)
	assert.Same(t, first, again, "the same spec is the same backend")
	assert.Equal(t, []string{api}, res.targets(), "one resolution for the two calls")

	own, err := svc.Backend(h.ctx, route.Backend{Name: target, Authority: target}, nil)
	require.NoError(t, err)
	assert.NotSame(t, first, own)
	assert.Equal(t, []string{api}, res.targets(), "the target's own backend uses the Service's destination")

	fwd := func(i int) route.Backend {
		addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(10000+i))
		return route.Backend{Name: addr.String(), Forward: &route.Endpoint{Addr: addr}}
	}
	var fwd0 any
	for i := range maxBackends - 2 {
		b, err := svc.Backend(h.ctx, fwd(i), nil)
		require.NoError(t, err, i)
		if i == 0 {
			fwd0 = b
		}
	}

	_, err = svc.Backend(h.ctx, fwd(maxBackends), nil)
	require.Error(t, err, "a 65th backend")
	assert.Contains(t, err.Error(), target, "the error names the target")
	const other = "other.shop.svc.cluster.local:80"
	_, err = svc.Backend(h.ctx, route.Backend{Name: other, Authority: other}, nil)
	require.Error(t, err, "a 65th backend resolved by discovery")
	assert.Equal(t, []string{api}, res.targets(), "a refused backend resolves nothing")

	b, err := svc.Backend(h.ctx, fwd(0), nil)
	require.NoError(t, err, "a backend the Service has is still returned past the bound")
	assert.Same(t, fwd0, b)
	again, err = svc.Backend(h.ctx, route.Backend{Name: api, Authority: api}, nil)
	require.NoError(t, err)
	assert.Same(t, first, again)
}

// A Service's backends hold their destinations as long as the Service's
// own destination lives: when it is dropped, they are released (and
// dropped in turn when nobody else uses them).
func TestBackendDestinationsAreReleasedWithTheService(t *testing.T) {
	res := &resolver{}
	h := newHarness(t, Settings{Resolver: res, DestIdle: 1})
	d := h.st.Destinations().Fixed("test\x00"+target, target, nil, nil)
	require.NotNil(t, d)
	svc := h.st.Service(h.ctx, d)
	const api = "api.shop.svc.cluster.local:80"
	b, err := svc.Backend(h.ctx, route.Backend{Name: api, Authority: api}, nil)
	require.NoError(t, err)
	bd := b.(*backend).dest
	require.NotNil(t, bd)
	require.Equal(t, api, bd.Target())

	d.Release() // the connection ends: nobody uses the Service's destination
	stop := h.janitor()
	defer stop()
	require.True(t, ended(d.Context()), "the unused destination is dropped")
	require.True(t, ended(bd.Context()), "the backend's destination is released with the Service")
}
