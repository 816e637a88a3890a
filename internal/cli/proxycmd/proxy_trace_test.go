package proxycmd

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/tracing"
)

func TestProxyRunRefusesABadCollectorAddressNamingTheSetting(t *testing.T) {
	var errb bytes.Buffer
	started := false
	start := func(context.Context, tracing.Config, dataplane.Identity, *slog.Logger) (dataplane.Option, func(), error) {
		started = true
		return nil, func() {}, nil
	}
	env := lookupIn(map[string]string{"WEFT_PROXY_TRACE_COLLECTOR_ADDR": "http://collector:4317"})
	code := runProxy(context.Background(), nil, core.IO{Stdout: io.Discard, Stderr: &errb}, env, nil, WithTracing(start))
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errb.String(), `WEFT_PROXY_TRACE_COLLECTOR_ADDR="http://collector:4317"`)
	assert.False(t, started, "nothing starts on a bad setting")
}

func TestProxyRunWithoutTracingRefusesACollectorSetting(t *testing.T) {
	var errb bytes.Buffer
	env := lookupIn(map[string]string{"WEFT_PROXY_TRACE_COLLECTOR_ADDR": "collector.tracing:4317"})
	code := runProxy(context.Background(), nil, core.IO{Stdout: io.Discard, Stderr: &errb}, env, nil)
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errb.String(), "WEFT_PROXY_TRACE_COLLECTOR_ADDR is set, but this binary has no tracing")
}
