package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/mesh/local/demo"
)

func TestDemoShowsMutualTLSTrafficAndADeniedCaller(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := demo.Run(ctx, demo.Config{Out: &out, Duration: 3 * time.Second, Interval: 500 * time.Millisecond})
	require.NoError(t, err, out.String())
	t.Log(out.String())
	assert.True(t, sum.OK(), out.String())
	assert.Contains(t, sum.Identities, "frontend.demo.serviceaccount.identity.weft.cluster.local")
	assert.Contains(t, sum.Identities, "traffic.demo.serviceaccount.identity.weft.cluster.local")
	assert.Contains(t, out.String(), "denied intruder.demo.serviceaccount.identity.weft.cluster.local")
}

func TestDemoRedrawsInPlaceOnATerminal(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := demo.Run(ctx, demo.Config{Out: &out, TTY: true, Duration: 1500 * time.Millisecond, Interval: 500 * time.Millisecond})
	require.NoError(t, err)
	s := out.String()
	assert.GreaterOrEqual(t, strings.Count(s, "\x1b[H\x1b[2J"), 3, "one redraw per view and one for the final table")
	assert.Contains(t, s, "WORKLOAD")
	assert.NotContains(t, s, "t=0.5s workload=", "no plain lines on a terminal")
	assert.Contains(t, s, "Summary after")
}
