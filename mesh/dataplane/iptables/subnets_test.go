package iptables_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

func TestRulesSkipInboundConnectionsFromSubnetsOfTheirOwnFamily(t *testing.T) {
	cfg := iptables.DefaultConfig()
	var err error
	cfg.SkipSubnets, err = iptables.ParseSubnets("10.0.0.0/8, fd00::/8,192.168.1.0/24")
	require.NoError(t, err)
	v4, err := iptables.Script(cfg)
	require.NoError(t, err)
	assert.Contains(t, v4, "-A WEFT_INIT_PREROUTING -s 10.0.0.0/8 -j RETURN\n-A WEFT_INIT_PREROUTING -s 192.168.1.0/24 -j RETURN\n-A WEFT_INIT_PREROUTING -j WEFT_INIT_REDIRECT\n",
		"subnets skip before the redirect")
	assert.NotContains(t, v4, "fd00::/8", "iptables gets no IPv6 subnet")
	assert.NotContains(t, v4, "WEFT_INIT_OUTPUT -s", "skip-subnets is about inbound sources, as in Linkerd")

	cfg.IPv6 = true
	v6, err := iptables.Script(cfg)
	require.NoError(t, err)
	assert.Contains(t, v6, "-A WEFT_INIT_PREROUTING -s fd00::/8 -j RETURN\n")
	assert.NotContains(t, v6, "10.0.0.0/8", "ip6tables gets no IPv4 subnet")
}

func TestParseSubnetsNamesTheBadItem(t *testing.T) {
	for _, in := range []string{"10.0.0.0", "10.0.0.1/8", "fd00::/200", "nope"} {
		_, err := iptables.ParseSubnets(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), in)
	}
	got, err := iptables.ParseSubnets(" ,10.1.0.0/16,")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, got)
}

func TestSetCloseWaitTimeoutWritesWholeSeconds(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, iptables.CloseWaitSysctl)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("60\n"), 0o644))
	require.NoError(t, iptables.SetCloseWaitTimeout(root, 90*time.Minute+500*time.Millisecond))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "5400\n", string(b))

	assert.ErrorContains(t, iptables.SetCloseWaitTimeout(root, 500*time.Millisecond), "under a second")
	err = iptables.SetCloseWaitTimeout(t.TempDir(), time.Minute)
	require.Error(t, err, "a missing sysctl (no conntrack) is an error, not a silent skip")
	assert.True(t, strings.HasPrefix(err.Error(), "iptables: "))
}

func TestValidateFailsAtOnceWhenTheConnectAddressIsNotAnIPAndPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := iptables.Validate(ctx, "127.0.0.1:0", "example.com:80")
	assert.ErrorContains(t, err, `"example.com:80" is not IP:port`)
}
