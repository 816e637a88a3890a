package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// rateLimitYAML is an HTTPLocalRateLimitPolicy (document 4 after the
// namespace, the pod and the server) with the given spec lines below its
// targetRef.
const rateLimitYAML = `---
apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata: {name: rl, namespace: my-app}
spec:
  targetRef: %s
%s`

const webTarget = "{group: policy.linkerd.io, kind: Server, name: web-http}"

func rateLimited(t *testing.T, protocol, target, spec string) *policy.Index {
	t.Helper()
	server := replaceProtocol(fmt.Sprintf(serverYAML, ""), protocol)
	return build(t, "", "", server+fmt.Sprintf(rateLimitYAML, target, spec))
}

func replaceProtocol(doc, protocol string) string {
	return strings.Replace(doc, "proxyProtocol: HTTP/1", "proxyProtocol: "+protocol, 1)
}

func TestRateLimitFieldsLinkerdRefusesAreErrorsNamingTheFieldAndTheDocument(t *testing.T) {
	for _, c := range []struct {
		name, target, spec, field, want string
	}{
		{"zero total", webTarget, "  total: {requestsPerSecond: 0}\n", "spec.total.requestsPerSecond", "must be greater than 0"},
		{"negative total", webTarget, "  total: {requestsPerSecond: -5}\n", "spec.total.requestsPerSecond", "must be greater than 0, got -5"},
		{"total beyond the proxy API", webTarget, "  total: {requestsPerSecond: 4294967296}\n", "spec.total.requestsPerSecond", "must be at most 4294967295"},
		{"zero identity", webTarget, "  identity: {requestsPerSecond: 0}\n", "spec.identity.requestsPerSecond", "must be greater than 0"},
		{"identity above total", webTarget, "  total: {requestsPerSecond: 10}\n  identity: {requestsPerSecond: 11}\n",
			"spec.identity.requestsPerSecond", "less than or equal to spec.total.requestsPerSecond (10), got 11"},
		{"override above total", webTarget, "  total: {requestsPerSecond: 10}\n  overrides:\n  - requestsPerSecond: 20\n    clientRefs: [{kind: ServiceAccount, name: a}]\n",
			"spec.overrides[0].requestsPerSecond", "less than or equal to spec.total.requestsPerSecond (10), got 20"},
		{"zero override", webTarget, "  overrides:\n  - requestsPerSecond: 0\n    clientRefs: [{kind: ServiceAccount, name: a}]\n",
			"spec.overrides[0].requestsPerSecond", "must be greater than 0"},
		{"a client that is not a ServiceAccount", webTarget, "  overrides:\n  - requestsPerSecond: 5\n    clientRefs: [{group: policy.linkerd.io, kind: MeshTLSAuthentication, name: a}]\n",
			"spec.overrides[0].clientRefs[0]", "unsupported client MeshTLSAuthentication.policy.linkerd.io (want ServiceAccount)"},
		{"a route target", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  total: {requestsPerSecond: 5}\n",
			"spec.targetRef", "unsupported target HTTPRoute.gateway.networking.k8s.io"},
		{"a Server without its group", "{kind: Server, name: web-http}", "  total: {requestsPerSecond: 5}\n",
			"spec.targetRef", "unsupported target Server (want Server.policy.linkerd.io)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ix := rateLimited(t, "HTTP/1", c.target, c.spec)
			errs := ix.Errors()
			require.Len(t, errs, 1, "%v", ix.Problems())
			assert.Equal(t, c.field, errs[0].Field)
			assert.Contains(t, errs[0].Message, c.want)
			assert.Equal(t, "test.yaml document 4", errs[0].Location.String())
			assert.Equal(t, "HTTPLocalRateLimitPolicy my-app/rl", errs[0].Object.String())
			srv, ok := ix.Lookup(web, 8080)
			require.True(t, ok)
			assert.Nil(t, srv.RateLimit, "an invalid policy limits nothing")
		})
	}
}

func TestRateLimitIsServedWithTheHTTPProtocolsOnly(t *testing.T) {
	spec := "  total: {requestsPerSecond: 100}\n  identity: {requestsPerSecond: 10}\n"
	for _, c := range []struct {
		protocol string
		get      func(*inbound.ProxyProtocol) *inbound.HttpLocalRateLimit
		applies  bool
	}{
		{"HTTP/1", func(p *inbound.ProxyProtocol) *inbound.HttpLocalRateLimit { return p.GetHttp1().GetLocalRateLimit() }, true},
		{"HTTP/2", func(p *inbound.ProxyProtocol) *inbound.HttpLocalRateLimit { return p.GetHttp2().GetLocalRateLimit() }, true},
		{"unknown", func(p *inbound.ProxyProtocol) *inbound.HttpLocalRateLimit {
			return p.GetDetect().GetHttpLocalRateLimit()
		}, true},
		{"gRPC", nil, false},
		{"opaque", nil, false},
	} {
		t.Run(c.protocol, func(t *testing.T) {
			ix := rateLimited(t, c.protocol, webTarget, spec)
			require.Empty(t, ix.Errors())
			srv, ok := ix.Lookup(web, 8080)
			require.True(t, ok)
			if !c.applies {
				assert.Nil(t, srv.RateLimit)
				assert.Contains(t, problemsText(ix), "has proxyProtocol "+c.protocol+"; rate limits apply only to HTTP/1, HTTP/2 and unknown")
				return
			}
			require.NotNil(t, srv.RateLimit)
			pr := c.get(authz.ToProto(srv).GetProtocol())
			require.NotNil(t, pr)
			assert.Equal(t, uint32(100), pr.GetTotal().GetRequestsPerSecond())
			assert.Equal(t, uint32(10), pr.GetIdentity().GetRequestsPerSecond())
			back, err := authz.FromProto(authz.ToProto(srv))
			require.NoError(t, err)
			assert.Equal(t, srv.RateLimit.Total, back.RateLimit.Total)
			assert.Equal(t, "HTTPLocalRateLimitPolicy rl", back.RateLimit.Meta.String(), "named as Linkerd's controller names it")
		})
	}
}

func TestAServiceAccountNamedByTwoOverridesCountsAgainstTheLastAsInLinkerd(t *testing.T) {
	ix := rateLimited(t, "HTTP/1", webTarget, `  overrides:
  - requestsPerSecond: 5
    clientRefs: [{kind: ServiceAccount, name: api-gateway}, {kind: ServiceAccount, name: reports}]
  - requestsPerSecond: 7
    clientRefs: [{kind: ServiceAccount, name: api-gateway}]
  - requestsPerSecond: 9
    clientRefs: []
`)
	require.Empty(t, ix.Errors())
	srv, _ := ix.Lookup(web, 8080)
	require.NotNil(t, srv.RateLimit)
	assert.Equal(t, []authz.RateLimitOverride{
		{RequestsPerSecond: 5, Identities: []string{reportsID}},
		{RequestsPerSecond: 7, Identities: []string{gatewayID}},
	}, srv.RateLimit.Overrides, "the override without clients is dropped")
	text := problemsText(ix)
	assert.Contains(t, text, "spec.overrides[1].clientRefs[0]: ServiceAccount my-app/api-gateway is also named by spec.overrides[0]")
	assert.Contains(t, text, "spec.overrides[2].clientRefs: names no client")
	assert.NoError(t, srv.RateLimit.Validate())
}

func TestExplainShowsTheLimitsThatCountTheClientsRequests(t *testing.T) {
	// all-unauthenticated lets everyone in; web-http has the limits.
	server := fmt.Sprintf(serverYAML, "  accessPolicy: all-unauthenticated\n")
	ix := build(t, "", "", server+fmt.Sprintf(rateLimitYAML, webTarget, `  total: {requestsPerSecond: 100}
  identity: {requestsPerSecond: 10}
  overrides:
  - requestsPerSecond: 50
    clientRefs: [{kind: ServiceAccount, name: api-gateway}, {kind: ServiceAccount, name: batch}]
`))
	require.Empty(t, ix.Errors())
	get := &authz.Request{Method: "GET", Path: "/"}
	for _, c := range []struct {
		client policy.Client
		scope  authz.RateLimitScope
		rps    uint32
		says   string
	}{
		{policy.Client{ServiceAccount: "api-gateway", Namespace: "my-app"}, authz.ScopeOverride, 50, "the override limit of 50/s that it shares with 1 other identity"},
		{policy.Client{ServiceAccount: "reports", Namespace: "my-app"}, authz.ScopeIdentity, 10, "its own per-identity limit of 10/s"},
		{policy.Client{Unauthenticated: true}, authz.ScopeIdentity, 10, "the per-identity limit of 10/s that all clients without a mesh identity share"},
	} {
		e, err := ix.Explain(policy.Request{Workload: web, Port: http8080, Client: c.client, HTTP: get})
		require.NoError(t, err)
		require.Equal(t, authz.Allow, e.Decision)
		require.NotNil(t, e.RateLimit, "%+v", c.client)
		assert.Equal(t, c.scope, e.RateLimit.Scope)
		assert.Equal(t, c.rps, e.RateLimit.RequestsPerSecond)
		assert.Equal(t, uint32(100), e.RateLimit.Total)
		s := e.String()
		assert.Contains(t, s, "rate limit HTTPLocalRateLimitPolicy my-app/rl: total 100/s, per identity 10/s, 1 override")
		assert.Contains(t, s, "against the total limit of 100/s that all clients share, then against "+c.says)
		assert.Contains(t, s, "429")

		res, err := ix.Evaluate(policy.Request{Workload: web, Port: http8080, Client: c.client, HTTP: get})
		require.NoError(t, err)
		assert.Equal(t, e.RateLimit, res.RateLimit, "Evaluate reports the same limits")
	}
}

func TestARefusedRequestIsNotCountedByTheRateLimit(t *testing.T) {
	ix := build(t, "", "", fmt.Sprintf(serverYAML, "")+fmt.Sprintf(rateLimitYAML, webTarget, "  total: {requestsPerSecond: 100}\n"))
	e, err := ix.Explain(policy.Request{Workload: web, Port: http8080, Client: policy.Client{Unauthenticated: true}, HTTP: &authz.Request{Method: "GET", Path: "/"}})
	require.NoError(t, err)
	require.Equal(t, authz.Deny, e.Decision, "web-http denies by default")
	assert.Nil(t, e.RateLimit, "the proxy checks rate limits after authorization")
	assert.NotContains(t, e.String(), "rate limit")
}
