package route_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/opaqueroute"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tlsroute"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

func tlsMD(name string) *meta.Metadata {
	return &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Group: "gateway.networking.k8s.io", Kind: "TLSRoute", Namespace: "shop", Name: name}}}
}

func exactSNI(name string) *tlsroute.SniMatch {
	return &tlsroute.SniMatch{Match: &tlsroute.SniMatch_Exact{Exact: name}}
}

func suffixSNI(reversed ...string) *tlsroute.SniMatch {
	return &tlsroute.SniMatch{Match: &tlsroute.SniMatch_Suffix_{Suffix: &tlsroute.SniMatch_Suffix{ReverseLabels: reversed}}}
}

// tlsTo is a TLS route sending to authority, for snis.
func tlsTo(name, authority string, snis ...*tlsroute.SniMatch) *outbound.TlsRoute {
	return &outbound.TlsRoute{Metadata: tlsMD(name), Snis: snis, Rules: []*outbound.TlsRoute_Rule{{
		Backends: &outbound.TlsRoute_Distribution{Kind: &outbound.TlsRoute_Distribution_RandomAvailable_{RandomAvailable: &outbound.TlsRoute_Distribution_RandomAvailable{
			Backends: []*outbound.TlsRoute_WeightedRouteBackend{{Weight: 1, Backend: &outbound.TlsRoute_RouteBackend{Backend: balancer(authority)}}},
		}}},
	}}}
}

func tlsPolicy(routes ...*outbound.TlsRoute) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Tls_{Tls: &outbound.ProxyProtocol_Tls{Routes: routes}}}}
}

// opaquePolicy is an Opaque protocol whose one route (named by md) sends
// to the weighted backends.
func opaquePolicy(md *meta.Metadata, backends ...*outbound.OpaqueRoute_WeightedRouteBackend) *outbound.OutboundPolicy {
	return &outbound.OutboundPolicy{Protocol: &outbound.ProxyProtocol{Kind: &outbound.ProxyProtocol_Opaque_{Opaque: &outbound.ProxyProtocol_Opaque{Routes: []*outbound.OpaqueRoute{{
		Metadata: md,
		Rules: []*outbound.OpaqueRoute_Rule{{Backends: &outbound.OpaqueRoute_Distribution{Kind: &outbound.OpaqueRoute_Distribution_RandomAvailable_{
			RandomAvailable: &outbound.OpaqueRoute_Distribution_RandomAvailable{Backends: backends}}}}},
	}}}}}}
}

func weightedTo(authority string, w uint32) *outbound.OpaqueRoute_WeightedRouteBackend {
	return &outbound.OpaqueRoute_WeightedRouteBackend{Weight: w, Backend: &outbound.OpaqueRoute_RouteBackend{Backend: balancer(authority)}}
}

func TestTLSRoutesAreChosenByTheBestSNIMatch(t *testing.T) {
	st, err := route.CompileStream(tlsPolicy(
		tlsTo("any", "any:443"),
		tlsTo("wild", "wild:443", suffixSNI("com", "example")),
		tlsTo("deeper", "deeper:443", suffixSNI("com", "example", "api")),
		tlsTo("exact", "exact:443", exactSNI("blue.api.example.com")),
	))
	require.NoError(t, err)
	require.True(t, st.TLS)
	for sni, want := range map[string]string{
		"blue.api.example.com":  "exact:443",
		"BLUE.api.example.com.": "exact:443", // no case, no trailing dot
		"green.api.example.com": "deeper:443",
		"api.example.com":       "wild:443", // a suffix needs a label of its own
		"www.example.com":       "wild:443",
		"example.com":           "any:443",
		"example.org":           "any:443",
		"":                      "any:443",
	} {
		r := st.Select(sni)
		require.NotNil(t, r, sni)
		b := r.Pick()
		require.NotNil(t, b, sni)
		assert.Equal(t, want, b.Authority, "SNI %q", sni)
	}
}

func TestAnSNINoTLSRouteMatchesSelectsNothing(t *testing.T) {
	st, err := route.CompileStream(tlsPolicy(tlsTo("blue", "blue:443", exactSNI("blue.example.com"))))
	require.NoError(t, err)
	assert.Nil(t, st.Select("green.example.com"))
	assert.Nil(t, st.Select(""), "no SNI matches no route that names one")
}

func TestAWeightOfZeroNeverTakesAConnection(t *testing.T) {
	md := &meta.Metadata{Kind: &meta.Metadata_Resource{Resource: &meta.Resource{Kind: "TCPRoute", Name: "split"}}}
	st, err := route.CompileStream(opaquePolicy(md, weightedTo("blue:5432", 0), weightedTo("green:5432", 100)))
	require.NoError(t, err)
	require.False(t, st.TLS)
	r := st.Select("")
	require.NotNil(t, r)
	for range 200 {
		assert.Equal(t, "green:5432", r.Pick().Authority)
	}
	st, err = route.CompileStream(opaquePolicy(md, weightedTo("blue:5432", 0), weightedTo("green:5432", 0)))
	require.NoError(t, err)
	assert.Nil(t, st.Select("").Pick(), "all weights 0: no backend")
}

func TestAnOpaqueProtocolWithOnlyItsBuiltInRouteIsNoStream(t *testing.T) {
	st, err := route.CompileStream(opaquePolicy(&meta.Metadata{Kind: &meta.Metadata_Default{Default: "opaq"}}, weightedTo("web:80", 1)))
	require.NoError(t, err)
	assert.Nil(t, st, "the proxy keeps its opaque path")
	st, err = route.CompileStream(nil)
	require.NoError(t, err)
	assert.Nil(t, st)
}

func TestStreamFiltersRefuse(t *testing.T) {
	forbidden := tlsTo("deny", "x:443")
	forbidden.Rules[0].Filters = []*outbound.TlsRoute_Filter{{Kind: &outbound.TlsRoute_Filter_Forbidden{Forbidden: &opaqueroute.Forbidden{}}}}
	invalid := tlsTo("bad", "x:443", exactSNI("bad.example.com"))
	rb := invalid.Rules[0].Backends.GetRandomAvailable().Backends[0].Backend
	rb.Backend.Kind = nil
	rb.Filters = []*outbound.TlsRoute_Filter{{Kind: &outbound.TlsRoute_Filter_Invalid{Invalid: &opaqueroute.Invalid{Message: "Service not found x"}}}}
	st, err := route.CompileStream(tlsPolicy(invalid, forbidden))
	require.NoError(t, err)
	assert.Equal(t, "forbidden", st.Select("other.example.com").Refuse)
	r := st.Select("bad.example.com")
	require.NotNil(t, r)
	assert.Empty(t, r.Refuse)
	assert.Equal(t, "invalid: Service not found x", r.Pick().Refuse)
}

// A policy the proxy cannot fully read is an error, never a route that
// lets everything through (BAD-INPUTS A8).
func TestStreamRoutesTheProxyCannotReadAreErrors(t *testing.T) {
	for name, mutate := range map[string]func(*outbound.TlsRoute){
		"a filter of unknown kind": func(r *outbound.TlsRoute) {
			r.Rules[0].Filters = []*outbound.TlsRoute_Filter{{}}
		},
		"no distribution": func(r *outbound.TlsRoute) { r.Rules[0].Backends = nil },
		"two rules":       func(r *outbound.TlsRoute) { r.Rules = append(r.Rules, r.Rules[0]) },
		"an SNI match of unknown kind": func(r *outbound.TlsRoute) {
			r.Snis = []*tlsroute.SniMatch{{}}
		},
		"a suffix without labels": func(r *outbound.TlsRoute) { r.Snis = []*tlsroute.SniMatch{suffixSNI()} },
		"a balancer without a destination": func(r *outbound.TlsRoute) {
			r.Rules[0].Backends.GetRandomAvailable().Backends[0].Backend.Backend.Kind = &outbound.Backend_Balancer{Balancer: &outbound.Backend_BalanceP2C{}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := tlsTo("r", "x:443", exactSNI("x.example.com"))
			mutate(r)
			_, err := route.CompileStream(tlsPolicy(r))
			assert.Error(t, err)
		})
	}
}
