package proxycmd

import (
	"github.com/weftmesh/weft/internal/cli/core"

	"bytes"
	"context"
	"os"
	"path/filepath"
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

func TestWeftInitGivesEachFamilyItsOwnSkippedSubnets(t *testing.T) {
	v4, v6 := iptables.NewMemory(), iptables.NewMemory()
	runners := map[string]iptables.Runner{"iptables": v4, "ip6tables": v6}
	var out, errb bytes.Buffer
	code := runInit(context.Background(), []string{"--subnets-to-ignore", "10.0.0.0/8,fd00::/8"}, core.IO{Stdout: &out, Stderr: &errb}, runners)
	require.Equal(t, core.ExitOK, code, errb.String())
	assert.Contains(t, v4.Save(), "-A WEFT_INIT_PREROUTING -s 10.0.0.0/8 -j RETURN")
	assert.NotContains(t, v4.Save(), "fd00::/8")
	assert.Contains(t, v6.Save(), "-A WEFT_INIT_PREROUTING -s fd00::/8 -j RETURN")
	assert.NotContains(t, v6.Save(), "10.0.0.0/8")

	out.Reset()
	code = InitCommand().Run(context.Background(), []string{"--dry-run", "--subnets-to-ignore", "10.0.0.0/8,fd00::/8", "--close-wait-timeout", "1h"}, core.IO{Stdout: &out, Stderr: &errb})
	require.Equal(t, core.ExitOK, code, errb.String())
	assert.Contains(t, out.String(), "-s 10.0.0.0/8 -j RETURN")
	assert.Contains(t, out.String(), "# ip6tables\n")
	assert.Contains(t, out.String(), "-s fd00::/8 -j RETURN")
	assert.Contains(t, out.String(), "would write 3600 to /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_close_wait")
}

func TestWeftInitWritesTheCloseWaitSysctlAfterTheRules(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, iptables.CloseWaitSysctl)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte("60\n"), 0o644))
	runners := map[string]iptables.Runner{"iptables": iptables.NewMemory(), "ip6tables": iptables.NewMemory()}
	var out, errb bytes.Buffer
	code := runInitAt(context.Background(), []string{"--close-wait-timeout", "2m"}, core.IO{Stdout: &out, Stderr: &errb}, runners, root)
	require.Equal(t, core.ExitOK, code, errb.String())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "120\n", string(b))

	// Without the sysctl (no conntrack, or /proc/sys read-only) weft-init
	// fails: the pod must not start believing the setting applied.
	code = runInitAt(context.Background(), []string{"--close-wait-timeout", "2m"}, core.IO{Stdout: &out, Stderr: &errb}, runners, t.TempDir())
	assert.Equal(t, core.ExitFailure, code)
	assert.Contains(t, errb.String(), "close-wait")
}

func TestWeftInitRejectsBadSubnetsAndCloseWait(t *testing.T) {
	for _, args := range [][]string{
		{"--subnets-to-ignore", "10.0.0.1/8"},
		{"--subnets-to-ignore", "nope"},
		{"--close-wait-timeout", "500ms"},
		{"validate", "--timeout", "0s"},
		{"validate", "extra"},
	} {
		var out, errb bytes.Buffer
		code := InitCommand().Run(context.Background(), args, core.IO{Stdout: &out, Stderr: &errb})
		assert.Equal(t, core.ExitUsage, code, "%v", args)
		assert.NotEmpty(t, errb.String(), "%v", args)
	}
}

func TestWeftInitValidateFailsWhenNothingRedirects(t *testing.T) {
	// On loopback with no rules, a connection to a closed port is refused:
	// the validator must say redirection is missing and exit non-zero.
	var out, errb bytes.Buffer
	code := InitCommand().Run(context.Background(), []string{"validate", "--listen-addr", "127.0.0.1:0", "--connect-addr", "127.0.0.1:9", "--timeout", "5s"}, core.IO{Stdout: &out, Stderr: &errb})
	assert.Equal(t, core.ExitFailure, code)
	assert.Contains(t, errb.String(), "not redirected to the proxy")
}
