package static_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/static"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

const web = "web.shop.serviceaccount.identity.linkerd.cluster.local"

func writeFixture(t *testing.T, policies string) string {
	dir := t.TempDir()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root"})
	leaf := anchor.Leaf(t, testutil.CertOptions{Name: web})
	testutil.WriteFile(t, filepath.Join(dir, "web.crt"), leaf.ChainPEM)
	testutil.WriteFile(t, filepath.Join(dir, "web.key"), leaf.KeyPEM)
	testutil.WriteFile(t, filepath.Join(dir, "roots.pem"), anchor.CertPEM)
	path := filepath.Join(dir, "proxy.yaml")
	testutil.WriteFile(t, path, []byte(`
identity:
  name: `+web+`
  certificate: web.crt
  key: web.key
  trustAnchors: roots.pem
destinations:
  "api.shop.svc.cluster.local:8080":
    - address: 10.1.0.7:8080
      identity: api.shop.serviceaccount.identity.linkerd.cluster.local
      protocol: opaque
      opaqueTransportPort: 4143
policies:
`+policies))
	return path
}

func TestLoadReadsIdentityDestinationsAndPolicies(t *testing.T) {
	path := writeFixture(t, `
  "8080":
    protocol: {detect: {timeout: 5s}}
    authorizations:
      - networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}]
        authentication: {meshTLS: {identities: {identities: [{name: `+web+`}]}}}
`)
	src, err := static.Load(path)
	require.NoError(t, err)
	assert.Equal(t, web, src.Identity.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ch, err := src.Resolver.Resolve(ctx, "api.shop.svc.cluster.local:8080")
	require.NoError(t, err)
	eps := <-ch
	require.Len(t, eps, 1)
	assert.Equal(t, netip.MustParseAddrPort("10.1.0.7:8080"), eps[0].Addr)
	assert.Equal(t, dataplane.HintOpaque, eps[0].Protocol)
	assert.Equal(t, uint16(4143), eps[0].OpaqueTransportPort)

	pch, err := src.Policies.Watch(ctx, 8080)
	require.NoError(t, err)
	srv, err := authz.FromProto(<-pch)
	require.NoError(t, err, "a hand-written authorization gets a name the evaluator accepts")
	assert.Equal(t, authz.Allow, authz.Evaluate(srv, authz.Conn{IP: netip.MustParseAddr("10.0.0.1"), TLS: true, Identity: web}, nil).Decision)
	assert.Equal(t, authz.Deny, authz.Evaluate(srv, authz.Conn{IP: netip.MustParseAddr("10.0.0.1")}, nil).Decision)
	_, err = src.Policies.Watch(ctx, 9090)
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
}

func TestLoadNamesTheBadField(t *testing.T) {
	for policies, want := range map[string]string{
		`  "http": {}` + "\n":                           "policies[http]",
		`  "8080": {protocol: {teleport: {}}}` + "\n":   "policies[8080]",
		`  "8080": {authorizations: "everyone"}` + "\n": "policies[8080]",
	} {
		_, err := static.Load(writeFixture(t, policies))
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), "proxy.yaml")
	}
	_, err := static.Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "missing.yaml")
}

func TestLoadReadsOutboundPoliciesAndProfiles(t *testing.T) {
	path := writeFixture(t, `
  "8080": {protocol: {detect: {}}, authorizations: [{networks: [{net: {ip: {ipv4: 0}, prefixLen: 0}}], authentication: {unauthenticated: {}}}]}
outboundPolicies:
  "api.shop.svc.cluster.local:8080":
    protocol:
      detect:
        timeout: 10s
        http1:
          routes:
            - metadata: {resource: {kind: HTTPRoute, name: api}}
              rules:
                - matches: [{path: {prefix: /v1}}]
                  retry: {maxRetries: 2, conditions: {statusRanges: [{start: 500, end: 599}]}}
profiles:
  "api.shop.svc.cluster.local:8080":
    retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}
    routes:
      - condition: {path: {regex: "/books/.*"}}
        isRetryable: true
        timeout: 2s
`)
	src, err := static.Load(path)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	och, err := src.OutboundPolicies.Watch(ctx, "api.shop.svc.cluster.local:8080")
	require.NoError(t, err)
	pol := <-och
	assert.Len(t, pol.GetProtocol().GetDetect().GetHttp1().GetRoutes(), 1)
	pch, err := src.Profiles.Watch(ctx, "api.shop.svc.cluster.local:8080")
	require.NoError(t, err)
	assert.True(t, (<-pch).GetRoutes()[0].GetIsRetryable())
	_, err = src.OutboundPolicies.Watch(ctx, "other:80")
	assert.ErrorIs(t, err, dataplane.ErrNotFound)
}

func TestLoadRefusesPoliciesTheProxyWouldRefuse(t *testing.T) {
	for extra, want := range map[string]string{
		"outboundPolicies:\n  \"a:80\": {protocol: {http1: {routes: [{rules: [{matches: [{path: {regex: \"([\"}}]}]}]}}}\n": `outboundPolicies[a:80]`,
		"profiles:\n  \"a:80\": {routes: [{isRetryable: true}]}\n":                                                          `profiles[a:80]`,
	} {
		_, err := static.Load(writeFixture(t, "  \"8080\": {protocol: {detect: {}}}\n"+extra))
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
	}
	_, err := static.Load(writeFixture(t, "  \"8080\": {protocol: {detect: {}}, authorizations: [{authentication: {unauthenticated: {}}}]}\n"))
	assert.ErrorContains(t, err, "policies[8080]", "an authorization without networks would never be applied")
}
