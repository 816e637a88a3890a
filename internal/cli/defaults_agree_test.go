package cli_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/inject"
	"github.com/weftmesh/weft/mesh/policy"
)

// TestPolicyControllerProxyAndInjectorStartFromTheSameClusterNetworks: the
// default cluster networks have one source, vocab.DefaultClusterNetworks,
// and every component that applies them agrees with it: the policy index,
// the proxy's defaults and documented setting, the injector's value, and
// that value as the proxy reads it back from the environment the
// injector writes.
func TestPolicyControllerProxyAndInjectorStartFromTheSameClusterNetworks(t *testing.T) {
	want := vocab.DefaultClusterNetworks()
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("172.16.0.0/12"),
		netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8"),
	}, want, "Linkerd's default clusterNetworks")

	pcfg, err := policy.NewConfig()
	require.NoError(t, err)
	assert.Equal(t, want, pcfg.ClusterNetworks, "policy.NewConfig")

	assert.Equal(t, want, dataplane.DefaultConfig().ClusterNetworks, "dataplane.DefaultConfig")
	for _, s := range dataplane.Settings() {
		if s.Env == vocab.EnvClusterNetworks {
			assert.Equal(t, "10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8", s.Default, "the proxy's documented default")
		}
	}

	injected := inject.DefaultValues().ClusterNetworks
	env := map[string]string{vocab.EnvClusterNetworks: injected}
	cfg, err := dataplane.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, want, cfg.ClusterNetworks, "the injector's clusterNetworks as the proxy reads them")

	// Each call is a fresh copy: a caller changing its slice changes no
	// one else's default.
	want[0] = netip.MustParsePrefix("127.0.0.0/8")
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/8"), vocab.DefaultClusterNetworks()[0])
	mine := dataplane.DefaultConfig()
	mine.ClusterNetworks[0] = netip.MustParsePrefix("127.0.0.0/8")
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/8"), dataplane.DefaultConfig().ClusterNetworks[0], "one Config's change leaks into the next")
}
