package cli

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftmesh/weft/internal/testutil"
)

func TestDemoRunsForItsDurationAndSummarizesMutualTLSTrafficAndADenial(t *testing.T) {
	var out, errb testutil.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	code := DemoCommand().Run(ctx, []string{"--duration", "5s"}, IO{Stdout: &out, Stderr: &errb})
	require.Equal(t, ExitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	assert.Less(t, time.Since(start), 60*time.Second)
	s := out.String()
	t.Log(s)

	// Not a terminal: plain periodic lines, no escape sequences.
	assert.NotContains(t, s, "\x1b[")
	assert.Regexp(t, `t=\d+\.\ds workload=traffic rps=`, s)

	// Successful requests between workloads, over mutual TLS, with identities.
	m := regexp.MustCompile(`result: (\d+) requests succeeded over mutual TLS; (\d+) denied by policy`).FindStringSubmatch(s)
	require.NotNil(t, m, "summary line missing:\n%s", s)
	ok, _ := strconv.Atoi(m[1])
	denied, _ := strconv.Atoi(m[2])
	assert.Greater(t, ok, 10)
	assert.GreaterOrEqual(t, denied, 1)
	assert.Contains(t, s, "backend's proxy accepted frontend.demo.serviceaccount.identity.weft.cluster.local")
	assert.Contains(t, s, "frontend's proxy accepted traffic.demo.serviceaccount.identity.weft.cluster.local")
	assert.Regexp(t, `backend's proxy: \d+ allowed, [1-9]\d* denied \(denied intruder\.demo\.serviceaccount\.identity\.weft\.cluster\.local\)`, s)
	assert.Contains(t, s, "temporary directory removed")
}

func TestDemoRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--duration", "-1s"}, {"--rate", "0"}, {"extra"}, {"--nope"}} {
		var out, errb bytes.Buffer
		code := DemoCommand().Run(context.Background(), args, IO{Stdout: &out, Stderr: &errb})
		assert.Equal(t, ExitUsage, code, "%v", args)
		assert.NotEmpty(t, errb.String(), "%v", args)
	}
}

func TestDemoPrintsItsMeshFile(t *testing.T) {
	var out, errb bytes.Buffer
	code := DemoCommand().Run(context.Background(), []string{"--print-mesh-file"}, IO{Stdout: &out, Stderr: &errb})
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out.String(), "allow: [frontend]")
}
