package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/cli"
)

// identityMakePKI creates an anchor and an issuer with `weft certs`.
func identityMakePKI(t *testing.T) (anchorDir, issuerDir string) {
	t.Helper()
	dir := t.TempDir()
	anchorDir, issuerDir = filepath.Join(dir, "anchor"), filepath.Join(dir, "issuer")
	st, _, errs := runCommand(t, cli.CertsCommand(), "", "create-anchor", "--out", anchorDir)
	require.Equal(t, cli.ExitOK, st, errs)
	st, _, errs = runCommand(t, cli.CertsCommand(), "", "create-issuer", "--anchor", anchorDir, "--out", issuerDir, "--lifetime", "1440h")
	require.Equal(t, cli.ExitOK, st, errs)
	return anchorDir, issuerDir
}

func TestCertsCreatesAnAnchorAndAnIssuerThatOpenSSLVerifies(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	for _, f := range []string{"ca.crt", "ca.key"} {
		assert.FileExists(t, filepath.Join(anchorDir, f))
	}
	info, err := os.Stat(filepath.Join(issuerDir, "key.pem"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "private keys are not world-readable")

	out, err := exec.Command("openssl", "verify", "-CAfile", filepath.Join(anchorDir, "ca.crt"), filepath.Join(issuerDir, "crt.pem")).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "OK")
}

func TestCertsRefusesToOverwriteWithoutForce(t *testing.T) {
	anchorDir, _ := identityMakePKI(t)
	before, err := os.ReadFile(filepath.Join(anchorDir, "ca.crt"))
	require.NoError(t, err)
	st, _, errs := runCommand(t, cli.CertsCommand(), "", "create-anchor", "--out", anchorDir)
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, errs, "exists")
	after, err := os.ReadFile(filepath.Join(anchorDir, "ca.crt"))
	require.NoError(t, err)
	assert.Equal(t, before, after)

	st, _, errs = runCommand(t, cli.CertsCommand(), "", "create-anchor", "--out", anchorDir, "--force")
	assert.Equal(t, cli.ExitOK, st, errs)
}

func TestCertsInspectReportsChainAndExpiry(t *testing.T) {
	anchorDir, issuerDir := identityMakePKI(t)
	st, out, errs := runCommand(t, cli.CertsCommand(), "", "inspect", filepath.Join(anchorDir, "ca.crt"), filepath.Join(issuerDir, "crt.pem"))
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Contains(t, out, "CN=root.weft.cluster.local")
	assert.Contains(t, out, "CN=identity.weft.cluster.local")
	assert.Contains(t, out, "chain:      ok")
	assert.NotContains(t, out, "WARNING")

	// A short-lived issuer gets the 30-day warning.
	short := filepath.Join(t.TempDir(), "short")
	st, _, errs = runCommand(t, cli.CertsCommand(), "", "create-issuer", "--anchor", anchorDir, "--out", short, "--lifetime", "240h")
	require.Equal(t, cli.ExitOK, st, errs)
	st, out, _ = runCommand(t, cli.CertsCommand(), "", "inspect", "--trust-anchors", filepath.Join(anchorDir, "ca.crt"), filepath.Join(short, "crt.pem"))
	assert.Equal(t, cli.ExitOK, st)
	assert.Contains(t, out, "less than 30 days")

	// An issuer from another anchor fails the chain check.
	otherAnchor, otherIssuer := identityMakePKI(t)
	_ = otherAnchor
	st, out, _ = runCommand(t, cli.CertsCommand(), "", "inspect", "--trust-anchors", filepath.Join(anchorDir, "ca.crt"), filepath.Join(otherIssuer, "crt.pem"))
	assert.Equal(t, cli.ExitFailure, st)
	assert.Contains(t, out, "FAILED")
}

func TestCertsRejectsBadInvocations(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	require.NoError(t, os.WriteFile(garbage, []byte("junk"), 0o600))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, cli.ExitUsage, "Usage"},
		{[]string{"frobnicate"}, cli.ExitUsage, "unknown subcommand"},
		{[]string{"create-anchor"}, cli.ExitUsage, "--out"},
		{[]string{"create-anchor", "--out", dir, "--lifetime", "1m"}, cli.ExitUsage, "shorter than one hour"},
		{[]string{"create-issuer", "--out", dir}, cli.ExitUsage, "--anchor"},
		{[]string{"create-issuer", "--anchor", filepath.Join(dir, "none"), "--out", dir}, cli.ExitFailure, "ca.crt"},
		{[]string{"inspect"}, cli.ExitUsage, "at least one"},
		{[]string{"inspect", garbage}, cli.ExitFailure, garbage},
		{[]string{"inspect", filepath.Join(dir, "missing.pem")}, cli.ExitFailure, "missing.pem"},
	}
	for _, tc := range cases {
		st, _, errs := runCommand(t, cli.CertsCommand(), "", tc.args...)
		assert.Equal(t, tc.code, st, "%v: %s", tc.args, errs)
		assert.Contains(t, errs, tc.want, "%v", tc.args)
	}
}
