package inject_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/mesh/inject"
)

func TestDefaultValuesAreValidAndMatchTheDocumentedDefaults(t *testing.T) {
	v := inject.DefaultValues()
	require.NoError(t, v.Validate())
	assert.Equal(t, "weft", v.ControlPlaneNamespace)
	assert.Equal(t, "cluster.local", v.IdentityTrustDomain)
	assert.Equal(t, inject.Ports{Inbound: 4143, Outbound: 4140, Admin: 4191, Control: 4190}, v.Proxy.Ports)
	assert.Equal(t, "25,587,3306,4444,5432,6379,9300,11211", v.Proxy.OpaquePorts)
	assert.True(t, v.Proxy.NativeSidecar)
	assert.Equal(t, int64(2102), v.Proxy.UID)
	assert.Equal(t, "ghcr.io/weftmesh/weft-proxy:dev", v.ProxyImage())
	assert.Equal(t, "ghcr.io/weftmesh/weft-init:dev", v.InitImage())
}

func TestParseValuesOverlaysDefaultsAndRoundTrips(t *testing.T) {
	v, err := inject.ParseValues([]byte(`
version: v1.2.3
controlPlaneNamespace: mesh
proxy:
  nativeSidecar: false
  image:
    name: registry.example.com/weft-proxy
    version: v1.2.4
`))
	require.NoError(t, err)
	assert.Equal(t, "mesh", v.ControlPlaneNamespace)
	assert.False(t, v.Proxy.NativeSidecar)
	assert.Equal(t, int32(4143), v.Proxy.Ports.Inbound, "defaults kept")
	assert.Equal(t, "registry.example.com/weft-proxy:v1.2.4", v.ProxyImage())
	assert.Equal(t, "ghcr.io/weftmesh/weft-init:v1.2.3", v.InitImage())
	assert.Equal(t, "weft-identity-headless.mesh.svc.cluster.local.:8080", v.IdentityAddress())

	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	again, err := inject.ParseValues(b)
	require.NoError(t, err)
	assert.Equal(t, v, again)
}

func TestParseValuesRejectsUnknownFieldsAndBadValues(t *testing.T) {
	_, err := inject.ParseValues([]byte("proxy:\n  logLevl: debug\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "logLevl")

	_, err = inject.ParseValues([]byte("proxy:\n  uid: 0\n  ports:\n    inbound: 70000\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "proxy.uid")
	assert.Contains(t, err.Error(), "proxy.ports.inbound")

	_, err = inject.ParseValues([]byte("identityTrustAnchorsPEM: not a pem\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "identityTrustAnchorsPEM")
}

func TestParsePortsAcceptsListsRangesAndNames(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"", ""},
		{"80", "80"},
		{" 443 , 80 ", "80,443"},
		{"9000-9100,9050", "9000-9100"},
		{"80,80,81", "80,81"},
		{"4190,4191", "4190,4191"},
		{"1-65535", "1-65535"},
		{"http", "8080"},
	} {
		r, err := inject.ParsePorts(tc.in, map[string]int32{"http": 8080})
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, r.String(), tc.in)
	}
	for _, bad := range []string{"0", "65536", "9000-8000", "80,", "a-b", "-1", "1-", "80 81", "http"} {
		_, err := inject.ParsePorts(bad, nil)
		assert.Error(t, err, bad)
	}
	r, err := inject.ParsePorts("25,1000-2000", nil)
	require.NoError(t, err)
	assert.True(t, r.Contains(1500))
	assert.False(t, r.Contains(26))
}
