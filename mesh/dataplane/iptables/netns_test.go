package iptables_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/internal/netns"
	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

// needNetns skips outside CI when namespaces cannot be made, and fails in
// CI.
func needNetns(t *testing.T) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs root, ip and iptables: %v", err)
		}
		t.Skipf("needs root, ip and iptables: %v", err)
	}
}

func newNS(ctx context.Context, t *testing.T, prefix string) *netns.NS {
	t.Helper()
	ns, err := netns.New(ctx, prefix)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ns.Delete()) })
	return ns
}

// apply installs cfg with both binaries inside ns, each with its family.
func apply(ctx context.Context, t *testing.T, ns *netns.NS, cfg iptables.Config) {
	t.Helper()
	for _, bin := range []string{"iptables", "ip6tables"} {
		c := cfg
		c.IPv6 = bin == "ip6tables"
		require.NoError(t, iptables.Apply(ctx, iptables.Exec{Binary: bin, Prefix: []string{"ip", "netns", "exec", ns.Name}}, c), bin)
	}
}

// TestValidateSucceedsOnlyWhenOutboundTrafficIsRedirected runs the network
// validator in a namespace whose default route leads nowhere (as a pod's
// does when the CNI plugin did not install the rules): it must fail there,
// and pass once the rules send outbound traffic to the proxy's port.
func TestValidateSucceedsOnlyWhenOutboundTrafficIsRedirected(t *testing.T) {
	needNetns(t)
	// Dozens of iptables processes, each of which may wait up to 5s for the
	// xtables lock on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := newNS(ctx, t, "weft-val")
	// The default route leads to a namespace that forwards nothing.
	peer := newNS(ctx, t, "weft-valp")
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	dev, peerDev := "va"+suffix, "vp"+suffix
	require.NoError(t, netns.Run(ctx, "ip", "link", "add", dev, "netns", ns.Name, "type", "veth", "peer", "name", peerDev, "netns", peer.Name))
	require.NoError(t, ns.Run(ctx, "ip", "addr", "add", "10.231.0.1/24", "dev", dev))
	require.NoError(t, ns.Run(ctx, "ip", "-6", "addr", "add", "fd00:231::1/64", "dev", dev, "nodad"))
	require.NoError(t, ns.Run(ctx, "ip", "link", "set", dev, "up"))
	require.NoError(t, peer.Run(ctx, "ip", "link", "set", peerDev, "up"))
	require.NoError(t, ns.Run(ctx, "ip", "route", "add", "default", "dev", dev))
	require.NoError(t, ns.Run(ctx, "ip", "-6", "route", "add", "default", "dev", dev))

	validate := func(listen, connect string, within time.Duration) error {
		vctx, vcancel := context.WithTimeout(ctx, within)
		defer vcancel()
		ln, err := ns.Listen(listen)
		require.NoError(t, err)
		defer ln.Close()
		return iptables.ValidateWith(vctx, ln, func(c context.Context) (net.Conn, error) { return ns.Dial(c, connect) }, netip.MustParseAddrPort(connect))
	}

	// No rules: the SYN leaves through the dummy device and nothing comes
	// back; the validator gives up when its timeout (the mechanism's
	// bound) ends.
	err := validate("0.0.0.0:4140", "1.1.1.1:20001", time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not redirected to the proxy")

	cfg := iptables.DefaultConfig() // the test runs as root, not as the proxy's user 2102
	apply(ctx, t, ns, cfg)
	assert.NoError(t, validate("0.0.0.0:4140", "1.1.1.1:20001", 20*time.Second), "IPv4")
	assert.NoError(t, validate("[::]:4140", "[fd00::1]:20001", 20*time.Second), "IPv6")

	// Rules that redirect to another port than the validator's: the
	// connection never reaches it (nothing listens there: refused).
	cfg.OutboundPort = 4999
	apply(ctx, t, ns, cfg)
	err = validate("0.0.0.0:4140", "1.1.1.1:20001", 5*time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not redirected to the proxy")
	require.NoError(t, iptables.Cleanup(ctx, iptables.Exec{Binary: "iptables", Prefix: []string{"ip", "netns", "exec", ns.Name}}))
	require.NoError(t, iptables.Cleanup(ctx, iptables.Exec{Binary: "ip6tables", Prefix: []string{"ip", "netns", "exec", ns.Name}}))
}

// TestSkipSubnetsLetConnectionsFromThoseSourcesReachTheApplication joins two
// namespaces with a veth pair; in the "pod" namespace an application port
// and a stand-in for the proxy's inbound port each answer with their name.
// Connections from a skipped subnet reach the application; others, and
// those of the other family, reach the proxy.
func TestSkipSubnetsLetConnectionsFromThoseSourcesReachTheApplication(t *testing.T) {
	needNetns(t)
	// Dozens of iptables processes, each of which may wait up to 5s for the
	// xtables lock on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := newNS(ctx, t, "weft-skc")
	pod := newNS(ctx, t, "weft-skp")
	suffix := fmt.Sprint(time.Now().UnixNano() % 100000)
	vc, vp := "sc"+suffix, "sp"+suffix
	require.NoError(t, netns.Run(ctx, "ip", "link", "add", vc, "netns", client.Name, "type", "veth", "peer", "name", vp, "netns", pod.Name))
	for _, c := range []struct {
		ns      *netns.NS
		dev     string
		v4, v6  string
		peerDev string
	}{{client, vc, "10.232.0.1/30", "fd00:232::1/64", vp}, {pod, vp, "10.232.0.2/30", "fd00:232::2/64", vc}} {
		require.NoError(t, c.ns.Run(ctx, "ip", "addr", "add", c.v4, "dev", c.dev))
		require.NoError(t, c.ns.Run(ctx, "ip", "-6", "addr", "add", c.v6, "dev", c.dev, "nodad"))
		require.NoError(t, c.ns.Run(ctx, "ip", "link", "set", c.dev, "up"))
	}
	for _, port := range []string{"8080", "4143"} {
		ln, err := pod.Listen("[::]:" + port)
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		name := map[string]string{"8080": "app", "4143": "proxy"}[port]
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, name)
				c.Close()
			}
		}()
	}
	who := func(addr string) string {
		var got []byte
		require.Eventually(t, func() bool {
			dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
			defer dcancel()
			c, err := client.Dial(dctx, addr)
			if err != nil {
				return false
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			got, err = io.ReadAll(c)
			return err == nil && len(got) > 0
		}, 20*time.Second, 50*time.Millisecond, "connecting to %s", addr)
		return string(got)
	}

	cfg := iptables.DefaultConfig()
	apply(ctx, t, pod, cfg)
	assert.Equal(t, "proxy", who("10.232.0.2:8080"), "without skip-subnets inbound goes to the proxy")

	cfg.SkipSubnets = []netip.Prefix{netip.MustParsePrefix("10.232.0.0/30")}
	apply(ctx, t, pod, cfg)
	assert.Equal(t, "app", who("10.232.0.2:8080"), "a skipped IPv4 source reaches the application")
	assert.Equal(t, "proxy", who("[fd00:232::2]:8080"), "the IPv4 subnet does not cover IPv6 clients")

	cfg.SkipSubnets = append(cfg.SkipSubnets, netip.MustParsePrefix("fd00:232::/64"))
	apply(ctx, t, pod, cfg)
	assert.Equal(t, "app", who("[fd00:232::2]:8080"), "a skipped IPv6 source reaches the application")
	save, err := pod.Output(ctx, "ip6tables-save", "-t", "nat")
	require.NoError(t, err)
	assert.Contains(t, save, "-A WEFT_INIT_PREROUTING -s fd00:232::/64 -j RETURN")
	assert.NotContains(t, save, "10.232.0.0", "no IPv4 subnet in ip6tables")
}

// TestSetCloseWaitTimeoutChangesOnlyThePodsNamespace writes the conntrack
// sysctl from inside a namespace and checks that the host's value stays.
func TestSetCloseWaitTimeoutChangesOnlyThePodsNamespace(t *testing.T) {
	needNetns(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := newNS(ctx, t, "weft-cw")
	apply(ctx, t, ns, iptables.DefaultConfig()) // nat rules load conntrack
	host, hostErr := os.ReadFile("/proc/" + iptables.CloseWaitSysctl)
	require.NoError(t, ns.Do(func() error { return iptables.SetCloseWaitTimeout("/proc", 4321*time.Second) }))
	got, err := ns.Output(ctx, "cat", "/proc/"+iptables.CloseWaitSysctl)
	require.NoError(t, err)
	assert.Equal(t, "4321", strings.TrimSpace(got))
	if hostErr == nil {
		after, err := os.ReadFile("/proc/" + iptables.CloseWaitSysctl)
		require.NoError(t, err)
		assert.Equal(t, string(host), string(after), "the host's value is untouched")
	}
}
