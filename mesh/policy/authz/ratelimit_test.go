package authz_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

func rateLimitedServer(p authz.Protocol) *authz.Server {
	return &authz.Server{
		Meta:          authz.Meta{Group: "policy.linkerd.io", Kind: "Server", Namespace: "my-app", Name: "web-http"},
		Protocol:      p,
		DetectTimeout: 10 * time.Second,
		HTTPRoutes:    []authz.HTTPRoute{authz.DefaultHTTPRoute()},
		GRPCRoutes:    []authz.GRPCRoute{authz.DefaultGRPCRoute()},
		RateLimit: &authz.RateLimit{
			Meta:  authz.Meta{Group: "policy.linkerd.io", Kind: "HTTPLocalRateLimitPolicy", Namespace: "my-app", Name: "rl"},
			Total: 100, Identity: 10,
			Overrides: []authz.RateLimitOverride{{RequestsPerSecond: 50, Identities: []string{gatewayID, otherID}}},
		},
	}
}

func TestRateLimitsTravelWithTheHTTPProtocolsAndComeBackTheSame(t *testing.T) {
	for _, p := range []authz.Protocol{authz.ProtocolDetect, authz.ProtocolHTTP1, authz.ProtocolHTTP2} {
		srv := rateLimitedServer(p)
		back, err := authz.FromProto(authz.ToProto(srv))
		require.NoError(t, err, p)
		want := *srv.RateLimit
		want.Meta.Namespace = "" // Linkerd's controller names the policy without it
		assert.Equal(t, &want, back.RateLimit, p)
	}
	for _, p := range []authz.Protocol{authz.ProtocolGRPC, authz.ProtocolOpaque, authz.ProtocolTLS} {
		back, err := authz.FromProto(authz.ToProto(rateLimitedServer(p)))
		require.NoError(t, err, p)
		assert.Nil(t, back.RateLimit, "%s has no place for a rate limit in the proxy API", p)
	}
}

func TestAProxyRefusesARateLimitItCannotEnforceExactly(t *testing.T) {
	for name, change := range map[string]func(*inbound.HttpLocalRateLimit){
		"unknown field": func(r *inbound.HttpLocalRateLimit) {
			r.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
		},
		"unknown field in an override": func(r *inbound.HttpLocalRateLimit) {
			r.Overrides[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
		},
		"override without a limit":  func(r *inbound.HttpLocalRateLimit) { r.Overrides[0].Limit = nil },
		"override with a zero rate": func(r *inbound.HttpLocalRateLimit) { r.Overrides[0].Limit.RequestsPerSecond = 0 },
		"override without clients":  func(r *inbound.HttpLocalRateLimit) { r.Overrides[0].Clients = nil },
		"empty identity":            func(r *inbound.HttpLocalRateLimit) { r.Overrides[0].Clients.Identities[0].Name = "" },
		"identity in two overrides": func(r *inbound.HttpLocalRateLimit) {
			r.Overrides = append(r.Overrides, proto.Clone(r.Overrides[0]).(*inbound.HttpLocalRateLimit_Override))
		},
	} {
		ps := authz.ToProto(rateLimitedServer(authz.ProtocolHTTP1))
		change(ps.GetProtocol().GetHttp1().GetLocalRateLimit())
		_, err := authz.FromProto(ps)
		assert.ErrorContains(t, err, "rate limit", name)
	}

	// Zero or missing total and identity limits mean none, as in Linkerd.
	ps := authz.ToProto(rateLimitedServer(authz.ProtocolHTTP2))
	rl := ps.GetProtocol().GetHttp2().GetLocalRateLimit()
	rl.Total = nil
	rl.Identity = &inbound.HttpLocalRateLimit_Limit{}
	srv, err := authz.FromProto(ps)
	require.NoError(t, err)
	assert.Zero(t, srv.RateLimit.Total)
	assert.Zero(t, srv.RateLimit.Identity)
}

func TestClientLimitPicksTheOverrideThenTheIdentityLimit(t *testing.T) {
	rl := rateLimitedServer(authz.ProtocolHTTP1).RateLimit
	for id, want := range map[string]struct {
		scope authz.RateLimitScope
		rps   uint32
	}{
		gatewayID:                  {authz.ScopeOverride, 50},
		otherID:                    {authz.ScopeOverride, 50},
		"someone.else.example.org": {authz.ScopeIdentity, 10},
		"":                         {authz.ScopeIdentity, 10},
	} {
		scope, rps := rl.ClientLimit(id)
		assert.Equal(t, want.scope, scope, id)
		assert.Equal(t, want.rps, rps, id)
	}
	none := &authz.RateLimit{Total: 5}
	scope, rps := none.ClientLimit(gatewayID)
	assert.Equal(t, authz.ScopeNone, scope)
	assert.Zero(t, rps)
	assert.Equal(t, "HTTPLocalRateLimitPolicy my-app/rl: total 100/s, per identity 10/s, 1 override", rl.String())
}
