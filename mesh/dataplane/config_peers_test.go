package dataplane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

func TestFromEnvReadsTheTapHandshakeBoundAndInboundPortsOnly(t *testing.T) {
	env := map[string]string{"WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT": "750ms", "WEFT_PROXY_INBOUND_PORTS_ONLY": "true",
		"WEFT_PROXY_INBOUND_PORTS": "8080,9000-9001"}
	cfg, err := dataplane.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	assert.Equal(t, 750*time.Millisecond, cfg.TapHandshakeTimeout)
	assert.True(t, cfg.InboundPortsOnly)

	def := dataplane.DefaultConfig()
	assert.Equal(t, 3*time.Second, def.TapHandshakeTimeout)
	assert.False(t, def.InboundPortsOnly, "any port of the workload, as Linkerd, unless told otherwise")

	for name, val := range map[string]string{"WEFT_PROXY_TAP_HANDSHAKE_TIMEOUT": "0s", "WEFT_PROXY_INBOUND_PORTS_ONLY": "sometimes"} {
		_, err := dataplane.FromEnv(func(k string) (string, bool) {
			if k == name {
				return val, true
			}
			return "", false
		})
		assert.ErrorContains(t, err, name)
	}
}

// A proxy given no policy source serves every port with the default
// policy; declared inbound ports have nothing to wait for.
func TestAProxyWithoutAPolicySourceRunsWithDeclaredInboundPorts(t *testing.T) {
	pk := newPKI(t)
	cfg := testConfig()
	cfg.InboundPorts, _ = dataplane.ParsePorts("8080")
	r := startProxy(t, cfg, pk.identity(t, idB), nil, nil, dataplane.Listeners{Inbound: testutil.Listen(t)})
	testutil.Eventually(t, 10*time.Second, func() bool { return r.proxy.Ready() == nil }, "the proxy is ready")
}

func TestFromEnvReadsTheOutboundSendBuffer(t *testing.T) {
	assert.Equal(t, 256<<10, dataplane.DefaultConfig().OutboundSendBuffer)
	for val, want := range map[string]int{"65536": 64 << 10, "0": 0} {
		cfg, err := dataplane.FromEnv(func(k string) (string, bool) {
			return val, k == "WEFT_PROXY_OUTBOUND_SEND_BUFFER"
		})
		require.NoError(t, err, val)
		assert.Equal(t, want, cfg.OutboundSendBuffer, val)
	}
	for _, val := range []string{"-1", "100", "big", "1073741824"} {
		cfg, err := dataplane.FromEnv(func(k string) (string, bool) {
			return val, k == "WEFT_PROXY_OUTBOUND_SEND_BUFFER"
		})
		if err == nil {
			err = cfg.Validate()
		}
		assert.ErrorContains(t, err, "WEFT_PROXY_OUTBOUND_SEND_BUFFER", val)
	}
}
