package iptables_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/netns"
	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

func TestRulesRedirectInboundAndOutboundExceptProxyLoopbackAndIgnoredPorts(t *testing.T) {
	cfg := iptables.DefaultConfig()
	var err error
	cfg.InboundPortsToIgnore, err = iptables.ParsePorts("4190,4191")
	require.NoError(t, err)
	cfg.OutboundPortsToIgnore, err = iptables.ParsePorts("443, 9000-9100")
	require.NoError(t, err)
	rules, err := iptables.Rules(cfg)
	require.NoError(t, err)
	var got []string
	for _, r := range rules {
		got = append(got, r.String())
	}
	assert.Equal(t, []string{
		"-A WEFT_INIT_REDIRECT -p tcp -j REDIRECT --to-ports 4143",
		"-A WEFT_INIT_PREROUTING -p tcp -m multiport --dports 4190,4191 -j RETURN",
		"-A WEFT_INIT_PREROUTING -j WEFT_INIT_REDIRECT",
		"-A WEFT_INIT_OUTPUT -m owner --uid-owner 2102 -j RETURN",
		"-A WEFT_INIT_OUTPUT -o lo -j RETURN",
		"-A WEFT_INIT_OUTPUT -p tcp -m multiport --dports 443,9000:9100 -j RETURN",
		"-A WEFT_INIT_OUTPUT -p tcp -j REDIRECT --to-ports 4140",
	}, got)
}

func TestRulesSplitLongPortListsIntoMultiportGroups(t *testing.T) {
	cfg := iptables.DefaultConfig()
	var ports []string
	for p := 1000; p < 1020; p++ {
		ports = append(ports, fmt.Sprint(p))
	}
	var err error
	cfg.OutboundPortsToIgnore, err = iptables.ParsePorts(strings.Join(ports, ","))
	require.NoError(t, err)
	rules, err := iptables.Rules(cfg)
	require.NoError(t, err)
	var groups []string
	for _, r := range rules {
		if r.Chain == iptables.ChainOutput && strings.Contains(r.String(), "multiport") {
			groups = append(groups, r.Spec[5])
		}
	}
	require.Len(t, groups, 2)
	assert.Len(t, strings.Split(groups[0], ","), 15)
	assert.Len(t, strings.Split(groups[1], ","), 5)
}

func TestParsePortsNamesTheBadItem(t *testing.T) {
	for _, in := range []string{"0", "65536", "http", "9000-8000", "1-x"} {
		_, err := iptables.ParsePorts(in)
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), in)
	}
	got, err := iptables.ParsePorts(" 25 ,,587")
	require.NoError(t, err)
	assert.Equal(t, []iptables.PortRange{{25, 25}, {587, 587}}, got)
}

func TestRulesRejectIdenticalOrMissingProxyPorts(t *testing.T) {
	_, err := iptables.Rules(iptables.Config{InboundPort: 4140, OutboundPort: 4140})
	assert.ErrorContains(t, err, "both 4140")
	_, err = iptables.Rules(iptables.Config{InboundPort: 4143})
	assert.Error(t, err)
}

func TestScriptIsIptablesRestoreInput(t *testing.T) {
	s, err := iptables.Script(iptables.DefaultConfig())
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s, "*nat\n:WEFT_INIT_REDIRECT - [0:0]\n"))
	assert.Contains(t, s, "-A PREROUTING -j WEFT_INIT_PREROUTING\n")
	assert.Contains(t, s, "-A OUTPUT -j WEFT_INIT_OUTPUT\n")
	assert.True(t, strings.HasSuffix(s, "COMMIT\n"))
}

func TestApplyIsIdempotentAndCleanupRemovesEverything(t *testing.T) {
	ctx := context.Background()
	m := iptables.NewMemory()
	empty := m.Save()
	cfg := iptables.DefaultConfig()
	require.NoError(t, iptables.Apply(ctx, m, cfg))
	once := m.Save()
	require.NoError(t, iptables.Apply(ctx, m, cfg))
	assert.Equal(t, once, m.Save(), "a second Apply changes nothing")
	assert.Equal(t, 1, strings.Count(once, "-A OUTPUT -j WEFT_INIT_OUTPUT"))

	cfg.OutboundPortsToIgnore = []iptables.PortRange{{443, 443}}
	require.NoError(t, iptables.Apply(ctx, m, cfg))
	assert.Contains(t, m.Save(), "--dports 443 -j RETURN", "a new config replaces the chain content")

	require.NoError(t, iptables.Cleanup(ctx, m))
	assert.Equal(t, empty, m.Save())
	require.NoError(t, iptables.Cleanup(ctx, m), "cleanup of nothing succeeds")
}

// TestApplyAgainstRealIptablesInANamespace runs the real binaries inside a
// namespace this test creates. It needs root; under CI it must run.
func TestApplyAgainstRealIptablesInANamespace(t *testing.T) {
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs root, ip and iptables: %v", err)
		}
		t.Skipf("needs root, ip and iptables: %v", err)
	}
	// Only a guard against a hung command: about twenty processes run, each
	// entering the namespace, and on a busy machine each may take seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns, err := netns.New(ctx, "weft-ipt")
	require.NoError(t, err)
	defer func() { assert.NoError(t, ns.Delete()) }()

	cfg := iptables.DefaultConfig()
	cfg.InboundPortsToIgnore = []iptables.PortRange{{4190, 4191}}
	for _, bin := range []string{"iptables", "ip6tables"} {
		r := iptables.Exec{Binary: bin, Prefix: []string{"ip", "netns", "exec", ns.Name}}
		require.NoError(t, iptables.Apply(ctx, r, cfg))
		first, err := ns.Output(ctx, bin+"-save", "-t", "nat")
		require.NoError(t, err)
		require.NoError(t, iptables.Apply(ctx, r, cfg))
		second, err := ns.Output(ctx, bin+"-save", "-t", "nat")
		require.NoError(t, err)
		assert.Equal(t, rulesOnly(first), rulesOnly(second), bin)
		assert.Contains(t, first, "-A WEFT_INIT_OUTPUT -m owner --uid-owner 2102 -j RETURN")
		assert.Contains(t, first, "-A WEFT_INIT_PREROUTING -p tcp -m multiport --dports 4190:4191 -j RETURN")
		assert.Contains(t, first, "-A WEFT_INIT_OUTPUT -p tcp -j REDIRECT --to-ports 4140")

		require.NoError(t, iptables.Cleanup(ctx, r))
		after, err := ns.Output(ctx, bin+"-save", "-t", "nat")
		require.NoError(t, err)
		assert.NotContains(t, after, "WEFT_", bin)
	}
}

func rulesOnly(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A") || strings.HasPrefix(l, ":WEFT") {
			out = append(out, l)
		}
	}
	return out
}

func ExampleScript() {
	cfg := iptables.DefaultConfig()
	cfg.OutboundPortsToIgnore = []iptables.PortRange{{443, 443}}
	s, _ := iptables.Script(cfg)
	fmt.Print(s)
	// Output:
	// *nat
	// :WEFT_INIT_REDIRECT - [0:0]
	// :WEFT_INIT_PREROUTING - [0:0]
	// :WEFT_INIT_OUTPUT - [0:0]
	// -A PREROUTING -j WEFT_INIT_PREROUTING
	// -A OUTPUT -j WEFT_INIT_OUTPUT
	// -A WEFT_INIT_REDIRECT -p tcp -j REDIRECT --to-ports 4143
	// -A WEFT_INIT_PREROUTING -j WEFT_INIT_REDIRECT
	// -A WEFT_INIT_OUTPUT -m owner --uid-owner 2102 -j RETURN
	// -A WEFT_INIT_OUTPUT -o lo -j RETURN
	// -A WEFT_INIT_OUTPUT -p tcp -m multiport --dports 443 -j RETURN
	// -A WEFT_INIT_OUTPUT -p tcp -j REDIRECT --to-ports 4140
	// COMMIT
}
