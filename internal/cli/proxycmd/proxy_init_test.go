package proxycmd

import (
	"github.com/weftmesh/weft/internal/cli/core"

	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/dataplane/iptables"
)

func TestWeftInitDryRunPrintsTheRules(t *testing.T) {
	var out, errb bytes.Buffer
	code := InitCommand().Run(context.Background(), []string{"--dry-run", "--proxy-uid", "1337", "--outbound-ports-to-ignore", "443,9000-9100", "--inbound-ports-to-ignore", "4190,4191"}, core.IO{Stdout: &out, Stderr: &errb})
	require.Equal(t, core.ExitOK, code, errb.String())
	assert.Contains(t, out.String(), "-A WEFT_INIT_OUTPUT -m owner --uid-owner 1337 -j RETURN")
	assert.Contains(t, out.String(), "--dports 443,9000:9100 -j RETURN")
	assert.Contains(t, out.String(), "-A WEFT_INIT_PREROUTING -p tcp -m multiport --dports 4190,4191 -j RETURN")
	assert.Contains(t, out.String(), "REDIRECT --to-ports 4143")
	assert.Contains(t, out.String(), "REDIRECT --to-ports 4140")
}

func TestWeftInitRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--outbound-ports-to-ignore", "70000"},
		{"--incoming-proxy-port", "0"},
		{"--incoming-proxy-port", "4140"},
		{"extra"},
		{"--no-such-flag"},
	} {
		var out, errb bytes.Buffer
		code := InitCommand().Run(context.Background(), args, core.IO{Stdout: &out, Stderr: &errb})
		assert.Equal(t, core.ExitUsage, code, "%v", args)
		assert.NotEmpty(t, errb.String(), "%v", args)
	}
}

func TestWeftInitInstallsIdempotentlyAndCleansUp(t *testing.T) {
	v4, v6 := iptables.NewMemory(), iptables.NewMemory()
	runners := map[string]iptables.Runner{"iptables": v4, "ip6tables": v6}
	run := func(args ...string) string {
		var out, errb bytes.Buffer
		require.Equal(t, core.ExitOK, runInit(context.Background(), args, core.IO{Stdout: &out, Stderr: &errb}, runners), errb.String())
		return out.String()
	}
	run()
	first := v4.Save()
	run()
	assert.Equal(t, first, v4.Save())
	assert.Equal(t, first, v6.Save())
	assert.Equal(t, 1, strings.Count(first, "-A OUTPUT -j WEFT_INIT_OUTPUT"))
	assert.Contains(t, run("--cleanup"), "removed")
	assert.NotContains(t, v4.Save(), "WEFT")
	assert.NotContains(t, v6.Save(), "WEFT")
}
