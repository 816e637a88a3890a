package dataplane_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnvWithNothingSetGivesTheDefaults(t *testing.T) {
	cfg, err := dataplane.FromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, dataplane.DefaultConfig(), cfg)
	assert.Equal(t, "0.0.0.0:4143", cfg.InboundAddr)
	assert.Equal(t, "127.0.0.1:4140", cfg.OutboundAddr)
	assert.Equal(t, "0.0.0.0:4191", cfg.AdminAddr)
	assert.Equal(t, 10*time.Second, cfg.DetectTimeout)
	assert.Equal(t, 120*time.Second, cfg.ShutdownGracePeriod)
	assert.False(t, cfg.AdminShutdown)
}

func TestFromEnvReadsEverySetting(t *testing.T) {
	cfg, err := dataplane.FromEnv(env(map[string]string{
		"WEFT_PROXY_INBOUND_ADDR":                 "0.0.0.0:5143",
		"WEFT_PROXY_OUTBOUND_ADDR":                "off",
		"WEFT_PROXY_ADMIN_ADDR":                   "127.0.0.1:5191",
		"WEFT_PROXY_OUTBOUND_CONNECT_ADDR":        "127.0.0.1:5140",
		"WEFT_PROXY_OUTBOUND_MAPPINGS":            "127.0.0.1:9000=web.shop.svc.cluster.local:8080, 127.0.0.1:9001=10.0.0.1:80",
		"WEFT_PROXY_INBOUND_PORTS":                "8080,9090",
		"WEFT_PROXY_INBOUND_OPAQUE_PORTS":         "25,587,3306,4444,5432,6379,9300,11211",
		"WEFT_PROXY_INBOUND_SKIP_PORTS":           "4190-4191",
		"WEFT_PROXY_OUTBOUND_SKIP_PORTS":          "443",
		"WEFT_PROXY_INBOUND_FORWARD_HOST":         "::1",
		"WEFT_PROXY_DEFAULT_INBOUND_POLICY":       "cluster-authenticated",
		"WEFT_PROXY_CLUSTER_NETWORKS":             "10.0.0.0/8, fd00::/8",
		"WEFT_PROXY_DETECT_TIMEOUT":               "2s",
		"WEFT_PROXY_CONNECT_TIMEOUT":              "500ms",
		"WEFT_PROXY_RESOLVE_TIMEOUT":              "1s",
		"WEFT_PROXY_POLICY_TIMEOUT":               "3",
		"WEFT_PROXY_SHUTDOWN_GRACE_PERIOD":        "30s",
		"WEFT_PROXY_ADMIN_SHUTDOWN":               "true",
		"WEFT_PROXY_HTTP_IDLE_TIMEOUT":            "30s",
		"WEFT_PROXY_HTTP_HEADER_TIMEOUT":          "5s",
		"WEFT_PROXY_HTTP_MAX_HEADER_BYTES":        "32768",
		"WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS": "250",
		"WEFT_PROXY_HTTP2_STREAM_WINDOW":          "262144",
		"WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW":  "131072",
		"WEFT_PROXY_HTTP2_CONNECTION_WINDOW":      "1048576",
		"WEFT_PROXY_HTTP2_RESET_BUDGET":           "50",
		"WEFT_PROXY_HTTP_POOL_WAIT_TIMEOUT":       "1500ms",
		"WEFT_PROXY_ADMIN_HEADER_TIMEOUT":         "2s",
		"WEFT_PROXY_ADMIN_IDLE_TIMEOUT":           "1m",
		"WEFT_PROXY_ADMIN_MAX_CONNECTIONS":        "20",
	}))
	require.NoError(t, err)
	assert.Equal(t, "0.0.0.0:5143", cfg.InboundAddr)
	assert.Empty(t, cfg.OutboundAddr)
	assert.Equal(t, "127.0.0.1:5140", cfg.ConnectAddr)
	assert.Equal(t, []dataplane.Mapping{{"127.0.0.1:9000", "web.shop.svc.cluster.local:8080"}, {"127.0.0.1:9001", "10.0.0.1:80"}}, cfg.Mappings)
	assert.Equal(t, []uint16{8080, 9090}, cfg.InboundPorts.List())
	assert.True(t, cfg.InboundOpaquePorts.Contains(3306))
	assert.False(t, cfg.InboundOpaquePorts.Contains(3307))
	assert.True(t, cfg.InboundSkipPorts.Contains(4190))
	assert.Equal(t, "443", cfg.OutboundSkipPorts.String())
	assert.Equal(t, "::1", cfg.InboundForwardHost)
	assert.Equal(t, "cluster-authenticated", cfg.DefaultInboundPolicy)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}, cfg.ClusterNetworks)
	assert.Equal(t, 2*time.Second, cfg.DetectTimeout)
	assert.Equal(t, 500*time.Millisecond, cfg.ConnectTimeout)
	assert.Equal(t, 3*time.Second, cfg.PolicyTimeout)
	assert.Equal(t, 30*time.Second, cfg.ShutdownGracePeriod)
	assert.True(t, cfg.AdminShutdown)
	assert.Equal(t, 30*time.Second, cfg.HTTPIdleTimeout)
	assert.Equal(t, 5*time.Second, cfg.HTTPHeaderTimeout)
	assert.Equal(t, 32768, cfg.HTTPMaxHeaderBytes)
	assert.Equal(t, uint32(250), cfg.H2MaxConcurrentStreams)
	assert.Equal(t, int32(262144), cfg.H2StreamWindow)
	assert.Equal(t, int32(131072), cfg.H2InitialStreamWindow)
	assert.Equal(t, int32(1048576), cfg.H2ConnectionWindow)
	assert.Equal(t, 50, cfg.H2ResetBudget)
	assert.Equal(t, 1500*time.Millisecond, cfg.HTTPPoolWaitTimeout)
	assert.Equal(t, 2*time.Second, cfg.AdminHeaderTimeout)
	assert.Equal(t, time.Minute, cfg.AdminIdleTimeout)
	assert.Equal(t, 20, cfg.AdminMaxConnections)
}

func TestFromEnvNamesEachBadVariableAndValue(t *testing.T) {
	cases := map[string]string{
		"WEFT_PROXY_INBOUND_ADDR":                 "4143",
		"WEFT_PROXY_ADMIN_ADDR":                   "example.com:4191",
		"WEFT_PROXY_INBOUND_OPAQUE_PORTS":         "3306,99999",
		"WEFT_PROXY_INBOUND_SKIP_PORTS":           "9000-8000",
		"WEFT_PROXY_OUTBOUND_SKIP_PORTS":          "https",
		"WEFT_PROXY_INBOUND_PORTS":                "0",
		"WEFT_PROXY_OUTBOUND_MAPPINGS":            "127.0.0.1:9000",
		"WEFT_PROXY_INBOUND_FORWARD_HOST":         "localhost",
		"WEFT_PROXY_DEFAULT_INBOUND_POLICY":       "allow-all",
		"WEFT_PROXY_CLUSTER_NETWORKS":             "10.0.0.0/33",
		"WEFT_PROXY_DETECT_TIMEOUT":               "soon",
		"WEFT_PROXY_CONNECT_TIMEOUT":              "-1s",
		"WEFT_PROXY_SHUTDOWN_GRACE_PERIOD":        "2 minutes",
		"WEFT_PROXY_ADMIN_SHUTDOWN":               "yes please",
		"WEFT_PROXY_HTTP_IDLE_TIMEOUT":            "0",
		"WEFT_PROXY_HTTP_MAX_HEADER_BYTES":        "100",
		"WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS": "many",
		"WEFT_PROXY_HTTP2_STREAM_WINDOW":          "1024",
		"WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW":  "65534",
		"WEFT_PROXY_HTTP2_RESET_BUDGET":           "-1",
		"WEFT_PROXY_HTTP2_BUFFER_LIMIT":           "-5",
		"WEFT_PROXY_ADMIN_HEADER_TIMEOUT":         "0s",
		"WEFT_PROXY_ADMIN_IDLE_TIMEOUT":           "forever",
		"WEFT_PROXY_ADMIN_MAX_CONNECTIONS":        "0",
	}
	for name, val := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := dataplane.FromEnv(env(map[string]string{name: val}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), name)
			assert.Contains(t, err.Error(), strings.ReplaceAll(val[:min(len(val), 20)], `"`, `\"`))
			assert.True(t, strings.HasPrefix(err.Error(), "dataplane: "), err.Error())
		})
	}
}

func TestFromEnvReportsEveryBadValueAtOnce(t *testing.T) {
	_, err := dataplane.FromEnv(env(map[string]string{"WEFT_PROXY_CONNECT_TIMEOUT": "-1s", "WEFT_PROXY_DETECT_TIMEOUT": "soon"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WEFT_PROXY_CONNECT_TIMEOUT")
	assert.Contains(t, err.Error(), "WEFT_PROXY_DETECT_TIMEOUT")
}

func TestValidateRejectsListenersSharingAnAddress(t *testing.T) {
	cfg := dataplane.DefaultConfig()
	cfg.AdminAddr = cfg.InboundAddr
	assert.ErrorContains(t, cfg.Validate(), "share address 0.0.0.0:4143")
}

// TestFromEnvNeedsAListenerThatCarriesTraffic: the binary binds its own
// listeners, so turning both off is a configuration error there (the
// library's Validate accepts it: Run may be given listeners).
func TestFromEnvNeedsAListenerThatCarriesTraffic(t *testing.T) {
	env := map[string]string{"WEFT_PROXY_INBOUND_ADDR": "off", "WEFT_PROXY_OUTBOUND_ADDR": ""}
	_, err := dataplane.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	assert.ErrorContains(t, err, "no inbound or outbound listener")
	cfg := dataplane.DefaultConfig()
	cfg.InboundAddr, cfg.OutboundAddr = "", ""
	assert.NoError(t, cfg.Validate())
}

func TestSettingsDocumentEveryVariableFromEnvReads(t *testing.T) {
	var names []string
	for _, s := range dataplane.Settings() {
		require.True(t, strings.HasPrefix(s.Env, "WEFT_PROXY_"))
		require.NotEmpty(t, s.Help)
		names = append(names, s.Env)
	}
	seen := map[string]bool{}
	_, _ = dataplane.FromEnv(func(k string) (string, bool) { seen[k] = true; return "", false })
	for k := range seen {
		assert.Contains(t, names, k, "%s is read but not documented", k)
	}
	for _, n := range names {
		assert.True(t, seen[n], "%s is documented but never read", n)
	}
}

func TestListenOpensEveryConfiguredListener(t *testing.T) {
	cfg := dataplane.DefaultConfig()
	cfg.InboundAddr, cfg.OutboundAddr, cfg.AdminAddr, cfg.ConnectAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", ""
	cfg.Mappings = []dataplane.Mapping{{Listen: "127.0.0.1:0", Authority: "web:80"}}
	ls, err := dataplane.Listen(testutil.Context(t, 0), cfg)
	require.NoError(t, err)
	defer ls.Close()
	assert.NotNil(t, ls.Inbound)
	assert.NotNil(t, ls.Outbound)
	assert.NotNil(t, ls.Admin)
	assert.Nil(t, ls.Connect)
	require.Len(t, ls.Mapped, 1)
	assert.Equal(t, "web:80", ls.Mapped[0].Authority)

	busy := testutil.Listen(t)
	cfg.InboundAddr = busy.Addr().String()
	_, err = dataplane.Listen(testutil.Context(t, 0), cfg)
	assert.ErrorContains(t, err, busy.Addr().String())
}

func TestTapSettingsAreReadAndTheTapListenerOpensOnlyWithTappers(t *testing.T) {
	env := map[string]string{
		"WEFT_PROXY_TAP_IDENTITIES":            " Tap.viz.serviceaccount.identity.weft.cluster.local, ,other.ns.serviceaccount.identity.weft.cluster.local",
		"WEFT_PROXY_TAP_ADDR":                  "127.0.0.1:0",
		"WEFT_PROXY_TAP_MAX_TAPS":              "3",
		"WEFT_PROXY_TAP_MAX_EVENTS_PER_SECOND": "50",
	}
	cfg, err := dataplane.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, []string{"tap.viz.serviceaccount.identity.weft.cluster.local", "other.ns.serviceaccount.identity.weft.cluster.local"}, cfg.TapIdentities)
	assert.Equal(t, 3, cfg.TapMaxTaps)
	assert.Equal(t, 50, cfg.TapMaxEventsPerSecond)

	for name, bad := range map[string]string{
		"WEFT_PROXY_TAP_IDENTITIES": "tap.viz/evil",
		"WEFT_PROXY_TAP_MAX_TAPS":   "0",
	} {
		_, err := dataplane.FromEnv(func(k string) (string, bool) {
			if k == name {
				return bad, true
			}
			return "", false
		})
		assert.ErrorContains(t, err, name, "a bad %s is refused by name", name)
	}

	cfg.InboundAddr, cfg.OutboundAddr, cfg.AdminAddr = "127.0.0.1:0", "", ""
	ls, err := dataplane.Listen(testutil.Context(t, 0), cfg)
	require.NoError(t, err)
	assert.NotNil(t, ls.Tap, "tappers named: the tap listener opens")
	ls.Close()
	cfg.TapIdentities = nil
	ls, err = dataplane.Listen(testutil.Context(t, 0), cfg)
	require.NoError(t, err)
	assert.Nil(t, ls.Tap, "no tapper: no tap listener")
	ls.Close()
}
