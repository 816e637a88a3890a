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
	"github.com/weftmesh/weft/mesh/dataplane/authz"
	"github.com/weftmesh/weft/mesh/dataplane/static"
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
	srv := <-pch
	assert.True(t, authz.Evaluate(srv, authz.Peer{Addr: netip.MustParseAddr("10.0.0.1"), TLS: true, Identity: web}).Allowed)
	assert.False(t, authz.Evaluate(srv, authz.Peer{Addr: netip.MustParseAddr("10.0.0.1")}).Allowed)
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
