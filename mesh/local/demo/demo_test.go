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

// TestTheFinalFiguresOfCallersAndProxiesCountTheSameRequests runs the demo
// fast enough that requests are in flight when it ends: the final figures
// are read once those have been answered, so what each caller saw and
// what the proxy in front of its server decided agree request for request.
func TestTheFinalFiguresOfCallersAndProxiesCountTheSameRequests(t *testing.T) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sum, err := demo.Run(ctx, demo.Config{Out: &out, Duration: 2 * time.Second, Interval: time.Second, Rate: 200})
	require.NoError(t, err, out.String())
	rows := map[string]demo.Row{}
	for _, r := range sum.Frame.Rows {
		rows[r.Workload] = r
	}
	traffic, frontend, backend, intruder := rows["traffic"], rows["frontend"], rows["backend"], rows["intruder"]
	require.Zero(t, traffic.Failed+frontend.Failed+intruder.Failed, out.String())
	assert.Positive(t, traffic.Succeeded, out.String())
	assert.Positive(t, intruder.Figures.Denied, out.String())
	assert.Equal(t, float64(traffic.Succeeded), frontend.Proxy.Allowed, "traffic's successes against the frontend proxy's allowed requests\n%s", out.String())
	assert.Equal(t, float64(frontend.Succeeded), backend.Proxy.Allowed, "the frontend's successes against the backend proxy's allowed requests\n%s", out.String())
	assert.Equal(t, float64(intruder.Figures.Denied), backend.Proxy.Denied, "the intruder's denials against the backend proxy's\n%s", out.String())
}
