package main

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The child attacker reads back what the parent saved, and refuses a
// state file that would send it off loopback.
func TestAttackEnvStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, runPKI(context.Background(), []string{"-out", filepath.Join(dir, "pki"),
		"-name", "client=" + atkClientID, "-name", "server=" + atkServerID,
		"-name", "attacker=" + atkAttackerID, "-name", "tapper=" + atkTapperID}, io.Discard))
	parent := &attackEnv{dir: dir, appHTTP: 1001, sIn: 1002, sAdmin: 1003, sTap: 1004, cH1: 1005, cAdmin: 1006,
		attackerSrc: net.ParseIP("127.0.0.2")}
	require.NoError(t, parent.saveState())

	child, err := loadAttackEnv(dir)
	require.NoError(t, err)
	assert.True(t, child.remote)
	assert.Equal(t, []int{1001, 1002, 1003, 1004, 1005, 1006},
		[]int{child.appHTTP, child.sIn, child.sAdmin, child.sTap, child.cH1, child.cAdmin})
	assert.True(t, child.attackerSrc.Equal(parent.attackerSrc))
	assert.Contains(t, child.certs, "attacker")
	assert.NotNil(t, child.meshTLS("attacker").Certificates[0].Leaf, "the attacker's certificate is parsed")

	parent.attackerSrc = net.ParseIP("192.0.2.7")
	require.NoError(t, parent.saveState())
	_, err = loadAttackEnv(dir)
	assert.ErrorContains(t, err, `attacker source "192.0.2.7" is not a loopback address`)

	require.NoError(t, os.WriteFile(filepath.Join(dir, attackEnvFile), []byte("{"), 0o600))
	_, err = loadAttackEnv(dir)
	assert.ErrorContains(t, err, attackEnvFile)
}

func TestAttackClientNeedsOneMeasuredAttack(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-env", dir, "-attack", "transport-header", "-window", "1s"},
		{"-env", dir, "-attack", "ping-flood-tls,tap-slots", "-window", "1s"},
		{"-env", dir, "-attack", "nonesuch", "-window", "1s"},
	} {
		err := runAttackClientCmd(context.Background(), args, io.Discard)
		assert.ErrorContains(t, err, "want one measured attack", args)
	}
	err := runAttackClientCmd(context.Background(), []string{"-attack", "ping-flood-tls"}, io.Discard)
	assert.ErrorContains(t, err, "-env, -attack and -window")
}
