package tracing_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

func env(kv map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := kv[k]; return v, ok }
}

func TestFromEnvReadsTheTraceSettings(t *testing.T) {
	cfg, err := tracing.FromEnv(env(map[string]string{
		"WEFT_PROXY_TRACE_COLLECTOR_ADDR":     "collector.tracing.svc.cluster.local:4317",
		"WEFT_PROXY_TRACE_COLLECTOR_IDENTITY": "collector.tracing.serviceaccount.identity.linkerd.cluster.local",
		"WEFT_PROXY_TRACE_SERVICE_NAME":       "web-proxy",
		"WEFT_PROXY_TRACE_ATTRIBUTES":         "k8s.pod.ip=10.0.0.7\n\nk8s.pod.uid = 1234\nk8s.container.name=weft-proxy\n",
		"WEFT_PROXY_TRACE_PROTOCOL":           "OpenTelemetry",
	}))
	require.NoError(t, err)
	assert.True(t, cfg.Enabled())
	assert.Equal(t, "collector.tracing.svc.cluster.local:4317", cfg.CollectorAddr)
	assert.Equal(t, "collector.tracing.serviceaccount.identity.linkerd.cluster.local", cfg.CollectorIdentity)
	assert.Equal(t, "web-proxy", cfg.ServiceName)
	assert.Equal(t, map[string]string{"k8s.pod.ip": "10.0.0.7", "k8s.pod.uid": "1234", "k8s.container.name": "weft-proxy"}, cfg.Attributes)

	off, err := tracing.FromEnv(env(nil))
	require.NoError(t, err)
	assert.False(t, off.Enabled(), "no collector, no tracing")
	assert.Equal(t, tracing.DefaultServiceName, off.ServiceName)
}

func TestFromEnvNamesTheSettingOfEveryBadValue(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"address without port", "WEFT_PROXY_TRACE_COLLECTOR_ADDR", "collector.tracing", "want HOST:PORT"},
		{"address with a URL", "WEFT_PROXY_TRACE_COLLECTOR_ADDR", "http://collector:4317", "want HOST:PORT"},
		{"port out of range", "WEFT_PROXY_TRACE_COLLECTOR_ADDR", "collector:70000", "not in 1..65535"},
		{"port zero", "WEFT_PROXY_TRACE_COLLECTOR_ADDR", "collector:0", "not in 1..65535"},
		{"host with a space", "WEFT_PROXY_TRACE_COLLECTOR_ADDR", "coll ector:4317", "character"},
		{"identity with a slash", "WEFT_PROXY_TRACE_COLLECTOR_IDENTITY", "spiffe://x/y", "character"},
		{"service name with a newline", "WEFT_PROXY_TRACE_SERVICE_NAME", "a\x01b", "not printable"},
		{"attribute without =", "WEFT_PROXY_TRACE_ATTRIBUTES", "k8s.pod.ip", "line 1: want KEY=VALUE"},
		{"attribute with empty key", "WEFT_PROXY_TRACE_ATTRIBUTES", "a=b\n=c", "line 2: empty key"},
		{"attribute twice", "WEFT_PROXY_TRACE_ATTRIBUTES", "a=b\na=c", "given twice"},
		{"attribute too long", "WEFT_PROXY_TRACE_ATTRIBUTES", "a=" + strings.Repeat("x", 2000), "longer than"},
		{"too many attributes", "WEFT_PROXY_TRACE_ATTRIBUTES", manyAttributes(65), "more than 64"},
		{"opencensus", "WEFT_PROXY_TRACE_PROTOCOL", "opencensus", "only opentelemetry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := tracing.FromEnv(env(map[string]string{c.key: c.value}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.key)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, tracing.Config{}, cfg, "no partial settings")
		})
	}
}

func manyAttributes(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString("k")
		b.WriteString(strings.Repeat("x", i))
		b.WriteString("=v\n")
	}
	return b.String()
}
