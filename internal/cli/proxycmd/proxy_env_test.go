package proxycmd

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
	"github.com/weftmesh/weft/mesh/dataplane/iptables"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestAProxyConfiguredEntirelyFromTheEnvironmentGetsEverySetting sets every
// variable weft-proxy documents and compares what it reads with a table of
// the values each one meant before the settings were split between
// dataplane, control and the binary: no variable changed name or meaning.
func TestAProxyConfiguredEntirelyFromTheEnvironmentGetsEverySetting(t *testing.T) {
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.weft.cluster.local"})
	const id = "web.shop.serviceaccount.identity.weft.cluster.local"
	const tapper = "tap.weft-viz.serviceaccount.identity.weft.cluster.local"
	env := map[string]string{
		"WEFT_PROXY_INBOUND_ADDR":                    "0.0.0.0:5143",
		"WEFT_PROXY_OUTBOUND_ADDR":                   "off",
		"WEFT_PROXY_ADMIN_ADDR":                      "127.0.0.1:5191",
		"WEFT_PROXY_OUTBOUND_CONNECT_ADDR":           "127.0.0.1:5140",
		"WEFT_PROXY_OUTBOUND_MAPPINGS":               "127.0.0.1:9000=web.shop.svc.cluster.local:8080, 127.0.0.1:9001=10.0.0.1:80",
		"WEFT_PROXY_IDENTITY_ADDR":                   "weft-identity.weft.svc.cluster.local:8080",
		"WEFT_PROXY_DESTINATION_ADDR":                "weft-dst.weft.svc.cluster.local:8086",
		"WEFT_PROXY_POLICY_ADDR":                     "127.0.0.1:8090",
		"WEFT_PROXY_TRUST_ANCHORS":                   string(anchor.CertPEM),
		"WEFT_PROXY_IDENTITY_TOKEN_FILE":             "/var/run/secrets/tokens/weft-identity-token",
		"WEFT_PROXY_IDENTITY_NAME":                   id,
		"WEFT_PROXY_DESTINATION_CONTEXT":             `{"ns":"shop","nodeName":"n1"}`,
		"WEFT_PROXY_NAMESPACE":                       "shop",
		"WEFT_PROXY_POD":                             "web-1",
		"WEFT_PROXY_SERVICE_ACCOUNT":                 "web",
		"WEFT_PROXY_INBOUND_PORTS":                   "8080,9090",
		"WEFT_PROXY_INBOUND_OPAQUE_PORTS":            "25,3306",
		"WEFT_PROXY_INBOUND_SKIP_PORTS":              "4190-4191",
		"WEFT_PROXY_OUTBOUND_SKIP_PORTS":             "443",
		"WEFT_PROXY_INBOUND_FORWARD_HOST":            "::1",
		"WEFT_PROXY_DEFAULT_INBOUND_POLICY":          "cluster-authenticated",
		"WEFT_PROXY_CLUSTER_NETWORKS":                "10.0.0.0/8, fd00::/8",
		"WEFT_PROXY_DETECT_TIMEOUT":                  "2s",
		"WEFT_PROXY_CONNECT_TIMEOUT":                 "500ms",
		"WEFT_PROXY_RESOLVE_TIMEOUT":                 "1s",
		"WEFT_PROXY_POLICY_TIMEOUT":                  "3",
		"WEFT_PROXY_SHUTDOWN_GRACE_PERIOD":           "30s",
		"WEFT_PROXY_HTTP_IDLE_TIMEOUT":               "30s",
		"WEFT_PROXY_HTTP_HEADER_TIMEOUT":             "5s",
		"WEFT_PROXY_HTTP_MAX_HEADER_BYTES":           "32768",
		"WEFT_PROXY_HTTP2_MAX_CONCURRENT_STREAMS":    "250",
		"WEFT_PROXY_HTTP2_STREAM_WINDOW":             "262144",
		"WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW":     "131072",
		"WEFT_PROXY_HTTP2_CONNECTION_WINDOW":         "1048576",
		"WEFT_PROXY_HTTP2_RESET_BUDGET":              "50",
		"WEFT_PROXY_HTTP_POOL_WAIT_TIMEOUT":          "1500ms",
		"WEFT_PROXY_HTTP2_WRITE_TIMEOUT":             "3s",
		"WEFT_PROXY_HTTP2_BUFFER_LIMIT":              "16777216",
		"WEFT_PROXY_TAP_ADDR":                        "127.0.0.1:5190",
		"WEFT_PROXY_TAP_IDENTITIES":                  " " + strings.ToUpper(tapper[:1]) + tapper[1:] + " ,",
		"WEFT_PROXY_TAP_MAX_TAPS":                    "3",
		"WEFT_PROXY_TAP_MAX_EVENTS_PER_SECOND":       "50",
		"WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT":           "2s",
		"WEFT_PROXY_INBOUND_PORTS_ONLY":              "true",
		"WEFT_PROXY_OUTBOUND_SEND_BUFFER":            "131072",
		"WEFT_PROXY_ADMIN_SHUTDOWN":                  "true",
		"WEFT_PROXY_ADMIN_HEADER_TIMEOUT":            "2s",
		"WEFT_PROXY_ADMIN_IDLE_TIMEOUT":              "1m",
		"WEFT_PROXY_ADMIN_MAX_CONNECTIONS":           "20",
		"WEFT_PROXY_LOG_LEVEL":                       "warn,linkerd=info",
		"WEFT_PROXY_LOG_FORMAT":                      "JSON",
		"WEFT_PROXY_INBOUND_CONNECT_TIMEOUT":         "250ms",
		"WEFT_PROXY_OUTBOUND_CONNECT_TIMEOUT":        "750ms",
		"WEFT_PROXY_INBOUND_DETECT_TIMEOUT":          "4s",
		"WEFT_PROXY_OUTBOUND_DETECT_TIMEOUT":         "6s",
		"WEFT_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT": "90s",
		"WEFT_PROXY_INBOUND_REQUIRE_IDENTITY_PORTS":  "8443",
		"WEFT_PROXY_ACCESS_LOG":                      "Apache",
		"WEFT_PROXY_CPU_RATIO_LIMIT":                 "0.5",
		"WEFT_PROXY_OUTBOUND_HTTP1_OVER_H2":          "true",
		"WEFT_PROXY_TRACE_COLLECTOR_ADDR":            "collector.tracing:4317",
		"WEFT_PROXY_TRACE_COLLECTOR_IDENTITY":        "collector.tracing.serviceaccount.identity.weft.cluster.local",
		"WEFT_PROXY_TRACE_SERVICE_NAME":              "web",
		"WEFT_PROXY_TRACE_ATTRIBUTES":                "k8s.pod.ip=10.0.0.7",
		"WEFT_PROXY_TRACE_PROTOCOL":                  "opentelemetry",
	}
	for _, s := range ProxySettings() {
		require.Contains(t, env, s.Env, "the table sets every documented variable")
	}
	require.Len(t, env, len(ProxySettings()), "the table sets only documented variables")

	got, err := ReadProxyEnv(lookupIn(env))
	require.NoError(t, err)

	ports := func(rs ...iptables.PortRange) dataplane.Ports { return dataplane.Ports(rs) }
	one := func(p uint16) iptables.PortRange { return iptables.PortRange{First: p, Last: p} }
	assert.Equal(t, ProxyEnv{
		Proxy: dataplane.Config{
			InboundAddr:  "0.0.0.0:5143",
			AdminAddr:    "127.0.0.1:5191",
			ConnectAddr:  "127.0.0.1:5140",
			Mappings:     []dataplane.Mapping{{Listen: "127.0.0.1:9000", Authority: "web.shop.svc.cluster.local:8080"}, {Listen: "127.0.0.1:9001", Authority: "10.0.0.1:80"}},
			InboundPorts: ports(one(8080), one(9090)), InboundOpaquePorts: ports(one(25), one(3306)),
			InboundSkipPorts: ports(iptables.PortRange{First: 4190, Last: 4191}), OutboundSkipPorts: ports(one(443)),
			InboundForwardHost:   "::1",
			DefaultInboundPolicy: "cluster-authenticated",
			ClusterNetworks:      []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")},
			DetectTimeout:        2 * time.Second, ConnectTimeout: 750 * time.Millisecond, ResolveTimeout: time.Second,
			PolicyTimeout: 3 * time.Second, ShutdownGracePeriod: 30 * time.Second,
			HTTPIdleTimeout: 30 * time.Second, HTTPHeaderTimeout: 5 * time.Second, HTTPMaxHeaderBytes: 32768,
			H2MaxConcurrentStreams: 250, H2StreamWindow: 262144, H2InitialStreamWindow: 131072, H2ConnectionWindow: 1048576, H2ResetBudget: 50, H2WriteTimeout: 3 * time.Second, H2BufferLimit: 16 << 20,
			HTTPPoolWaitTimeout: 1500 * time.Millisecond,
			AdminShutdown:       true, AdminHeaderTimeout: 2 * time.Second, AdminIdleTimeout: time.Minute, AdminMaxConnections: 20,
			TapAddr: "127.0.0.1:5190", TapIdentities: []string{tapper}, TapMaxTaps: 3, TapMaxEventsPerSecond: 50,
			TapHandshakeTimeout: 2 * time.Second, InboundPortsOnly: true, OutboundSendBuffer: 128 << 10,
			Extras: dataplane.Extras{
				InboundConnectTimeout: 250 * time.Millisecond,
				InboundDetectTimeout:  4 * time.Second, OutboundDetectTimeout: 6 * time.Second,
				DestinationIdleTimeout: 90 * time.Second,
				RequireIdentityPorts:   ports(one(8443)),
				AccessLog:              dataplane.AccessLogApache,
				CPURatioLimit:          0.5,
				HTTP1OverH2:            true,
			},
		},
		Control: control.Config{
			IdentityAddr:       "weft-identity.weft.svc.cluster.local:8080",
			DestinationAddr:    "weft-dst.weft.svc.cluster.local:8086",
			PolicyAddr:         "127.0.0.1:8090",
			TrustAnchorsPEM:    anchor.CertPEM,
			IdentityTokenFile:  "/var/run/secrets/tokens/weft-identity-token",
			IdentityName:       id,
			DestinationContext: `{"ns":"shop","nodeName":"n1"}`,
			Namespace:          "shop", Pod: "web-1", ServiceAccount: "web",
		},
		Trace: tracing.Config{
			CollectorAddr:     "collector.tracing:4317",
			CollectorIdentity: "collector.tracing.serviceaccount.identity.weft.cluster.local",
			ServiceName:       "web",
			Attributes:        map[string]string{"k8s.pod.ip": "10.0.0.7"},
			Pod:               "web-1", Namespace: "shop",
		},
		LogLevel:  "warn,linkerd=info",
		LogFormat: "json",
	}, got)
}

func TestAProxyWithNothingSetGetsTheDefaults(t *testing.T) {
	got, err := ReadProxyEnv(lookupIn(nil))
	require.NoError(t, err)
	assert.Equal(t, ProxyEnv{Proxy: dataplane.DefaultConfig(), Trace: tracing.Config{ServiceName: tracing.DefaultServiceName}, LogLevel: "info", LogFormat: "plain"}, got)
	assert.False(t, got.Trace.Enabled(), "tracing is off without a collector")
	for _, s := range logSettings() {
		assert.Equal(t, map[string]string{"WEFT_PROXY_LOG_LEVEL": got.LogLevel, "WEFT_PROXY_LOG_FORMAT": got.LogFormat}[s.Env], s.Default, "%s's documented default", s.Env)
	}
}

// TestEveryUnknownOrMalformedValueIsRefusedNamingItsVariable: whichever
// package reads a variable, a bad value is refused with an error naming
// the variable and the value, nothing is kept, and several bad values are
// all reported at once.
func TestEveryUnknownOrMalformedValueIsRefusedNamingItsVariable(t *testing.T) {
	cases := map[string]string{
		"WEFT_PROXY_INBOUND_ADDR":           "4143",
		"WEFT_PROXY_DEFAULT_INBOUND_POLICY": "allow-all",
		"WEFT_PROXY_DETECT_TIMEOUT":         "soon",
		"WEFT_PROXY_ACCESS_LOG":             "xml",
		"WEFT_PROXY_IDENTITY_ADDR":          "identity:http",
		"WEFT_PROXY_TRUST_ANCHORS":          "not a pem",
		"WEFT_PROXY_IDENTITY_NAME":          "web..shop",
		"WEFT_PROXY_LOG_LEVEL":              "loud",
		"WEFT_PROXY_LOG_FORMAT":             "xml",
		"WEFT_PROXY_TRACE_COLLECTOR_ADDR":   "collector",
		"WEFT_PROXY_TRACE_PROTOCOL":         "opencensus",
	}
	for name, val := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadProxyEnv(lookupIn(map[string]string{name: val}))
			require.Error(t, err)
			assert.Equal(t, ProxyEnv{}, got)
			assert.Contains(t, err.Error(), name+`="`+val[:min(len(val), 8)])
		})
	}
	_, err := ReadProxyEnv(lookupIn(cases))
	require.Error(t, err)
	for name := range cases {
		assert.Contains(t, err.Error(), name)
	}
}

func TestTheSettingsOfTheThreeReadersAreDisjointAndAllRead(t *testing.T) {
	seen := map[string]int{}
	_, _ = ReadProxyEnv(func(k string) (string, bool) { seen[k]++; return "", false })
	documented := map[string]bool{}
	for _, s := range ProxySettings() {
		assert.False(t, documented[s.Env], "%s is documented twice", s.Env)
		documented[s.Env] = true
		assert.Equal(t, 1, seen[s.Env], "%s is read by exactly one package", s.Env)
	}
	assert.Len(t, seen, len(documented), "every variable read is documented")
}
