package discovery_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/mesh/discovery"
)

func TestParseTargetAcceptsServiceNamesPodHostnamesAndIPs(t *testing.T) {
	svc := discovery.ServiceID{Namespace: "shop", Name: "web"}
	for _, tc := range []struct {
		path string
		want discovery.Target
	}{
		{"web.shop.svc.cluster.local:8080", discovery.Target{Service: svc, Port: 8080}},
		{"web.shop.svc.cluster.local", discovery.Target{Service: svc, Port: 80}},
		{"WEB.Shop.svc.Cluster.Local.:8080", discovery.Target{Service: svc, Port: 8080}},
		{"web-0.web.shop.svc.cluster.local:5432", discovery.Target{Service: svc, Hostname: "web-0", Port: 5432}},
		{"10.0.0.1:8080", discovery.Target{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080}},
		{"[fd00::1]:8080", discovery.Target{IP: netip.MustParseAddr("fd00::1"), Port: 8080}},
		{"[::ffff:10.0.0.1]:8080", discovery.Target{IP: netip.MustParseAddr("10.0.0.1"), Port: 8080}},
		{"10.0.0.1", discovery.Target{IP: netip.MustParseAddr("10.0.0.1"), Port: 80}},
	} {
		got, err := discovery.ParseTarget(tc.path, "cluster.local")
		require.NoError(t, err, tc.path)
		assert.Equal(t, tc.want, got, tc.path)
	}
}

func TestParseTargetRefusesMalformedPathsSayingWhy(t *testing.T) {
	for _, tc := range []struct{ path, why string }{
		{"", "empty path"},
		{"web.shop.svc.cluster.local:0", "out of the range"},
		{"web.shop.svc.cluster.local:65536", "out of the range"},
		{"web.shop.svc.cluster.local:-1", "not a port number"},
		{"web.shop.svc.cluster.local:http", "not a port number"},
		{"web.shop.svc.cluster.local:", "not a port number"},
		{":80", "empty host"},
		{"web.shop.svc.example.org:80", `not a service name in cluster domain "cluster.local"`},
		{"web.svc.cluster.local:80", "want <service>.<namespace>"},
		{"a.b.web.shop.svc.cluster.local:80", "want <service>.<namespace>"},
		{"we_b.shop.svc.cluster.local:80", `label "we_b"`},
		{"web..shop.svc.cluster.local:80", `label ""`},
		{"fd00::1", "IPv6 address must be in brackets"},
		{"[fd00::1%eth0]:80", "zones are not allowed"},
		{"[web]:80", "not an IPv6 address"},
		{"web.shop.svc.cluster.local:80:90", "brackets"},
		{strings.Repeat("a", 300), "longer than"},
		{"web shop.svc.cluster.local:80", `label "web shop"`},
	} {
		_, err := discovery.ParseTarget(tc.path, "cluster.local")
		require.Error(t, err, "%q", tc.path)
		assert.ErrorIs(t, err, discovery.ErrInvalidTarget, tc.path)
		assert.Contains(t, err.Error(), tc.why, tc.path)
	}
}

func TestParseTargetUsesTheConfiguredClusterDomain(t *testing.T) {
	got, err := discovery.ParseTarget("web.shop.svc.corp.example:80", "corp.example")
	require.NoError(t, err)
	assert.Equal(t, "web.shop:80", got.String())
	assert.Equal(t, "web.shop.svc.corp.example", got.FQDN("corp.example"))
	_, err = discovery.ParseTarget("web.shop.svc.cluster.local:80", "corp.example")
	assert.ErrorIs(t, err, discovery.ErrInvalidTarget)
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"web.shop.svc.cluster.local:80", "10.0.0.1:80", "[fd00::1]:80", "web-0.db.shop.svc.cluster.local", ":", "[", "]:", "a.b:c:d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		tgt, err := discovery.ParseTarget(path, "cluster.local")
		if err != nil {
			if !strings.Contains(err.Error(), "invalid destination") {
				t.Fatalf("error without the sentinel: %v", err)
			}
			return
		}
		if tgt.Port == 0 || tgt.Port > 65535 {
			t.Fatalf("accepted port %d", tgt.Port)
		}
		// The canonical form parses back to the same target.
		again, err := discovery.ParseTarget(canonical(tgt), "cluster.local")
		if err != nil || again != tgt {
			t.Fatalf("canonical form %q of %q does not round-trip: %v %v", canonical(tgt), path, again, err)
		}
	})
}

func canonical(t discovery.Target) string {
	if t.IsIP() {
		return t.String()
	}
	host := t.Service.Name + "." + t.Service.Namespace + ".svc.cluster.local"
	if t.Hostname != "" {
		host = t.Hostname + "." + host
	}
	return host + ":" + strings.Split(t.String(), ":")[1]
}

func TestParsePortSetReadsPortsRangesAndNames(t *testing.T) {
	ps, err := discovery.ParsePortSet(" 25, 4000-4100,mysql,4050-4200 ,,", map[string]int32{"mysql": 3306})
	require.NoError(t, err)
	assert.Equal(t, "25,3306,4000-4200", ps.String())
	for _, p := range []uint32{25, 3306, 4000, 4150, 4200} {
		assert.True(t, ps.Contains(p), "%d", p)
	}
	for _, p := range []uint32{0, 24, 26, 3999, 4201, 70000} {
		assert.False(t, ps.Contains(p), "%d", p)
	}
	for _, bad := range []string{"0", "65536", "10-5", "1-", "http", "1-2-3", "99999999999"} {
		_, err := discovery.ParsePortSet(bad, nil)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, "25,587,3306,4444,5432,6379,9300,11211", discovery.DefaultOpaquePorts().String())
}
