package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/weftmesh/weft/internal/cli"
)

func TestTapControllerRejectsBadFlags(t *testing.T) {
	anchorDir, _ := identityMakePKI(t)
	anchors := filepath.Join(anchorDir, "ca.crt")
	id := "weft-tap.weft.serviceaccount.identity.weft.cluster.local"
	need := []string{"--tls-cert", "c", "--tls-key", "k"}
	with := func(extra ...string) []string { return append(append([]string{}, need...), extra...) }
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", id}, cli.ExitUsage, "--tls-cert and --tls-key are required"},
		{with("--trust-anchors", anchors, "--identity", id), cli.ExitUsage, "--identity-addr, --trust-anchors and --identity are required"},
		{with("--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", "not a name"), cli.ExitUsage, `--identity "not a name"`},
		{with("--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", id, "--max-connections-per-peer", "0"), cli.ExitUsage, "--max-connections-per-peer 0"},
		{with("--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", id, "--max-taps-per-user", "0"), cli.ExitUsage, "every limit must be positive"},
		{with("--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", id, "--log-level", "loud"), cli.ExitUsage, "log-level"},
		{with("--identity-addr", "x:1", "--trust-anchors", anchors, "--identity", id), cli.ExitFailure, "serving certificate"},
	} {
		st, _, errs := runCommand(t, cli.TapControllerCommand(), "", tc.args...)
		assert.Equal(t, tc.code, st, "%v: %s", tc.args, errs)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}
