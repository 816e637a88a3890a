//go:build linux

package dataplane_test

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane"
)

// openIdle opens n opaque connections through the pair, echoes once on
// each and waits until both proxies parked all their copy directions.
func openIdle(t *testing.T, pr *pair, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", pr.clientAddr, 5*time.Second)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
		echoOn(t, c, opaque(fmt.Sprintf("open %d", i)))
	}
	for _, r := range []*running{pr.a, pr.b} {
		testutil.Eventually(t, 15*time.Second, func() bool { return dataplane.IdleParkedForTest(r.proxy) == 2*n },
			fmt.Sprintf("%d parked directions", 2*n))
	}
	return cs
}

func echoOn(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err := io.WriteString(c, msg)
	require.NoError(t, err)
	b := make([]byte, len(msg))
	_, err = io.ReadFull(c, b)
	require.NoError(t, err)
	require.Equal(t, msg, string(b))
}

// relayFlows counts the goroutines copying one direction of a relayed
// connection (internal/relay's flows), in every proxy of the process.
// It counts those alone: the process's goroutine total also holds what
// earlier tests left winding down (an exporter retrying, a connection
// closing), which made a bound on the total fail on a busy machine.
func relayFlows() int {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "internal/relay.(*flow).run(")
}

func TestIdleConnectionsThroughAPairHoldNoProxyGoroutines(t *testing.T) {
	pr := startPair(t, pairOptions{noTap: true})
	const n = 40
	cs := openIdle(t, pr, n)
	// Each proxy held two copy goroutines per connection before its
	// directions parked; parked, it holds none.
	testutil.Eventually(t, 10*time.Second, func() bool { return relayFlows() == 0 },
		"the proxies' copy goroutines to exit")

	// Bytes after the idle period go both ways (the echo answers), and
	// the directions park again.
	for i, c := range cs {
		echoOn(t, c, fmt.Sprintf("after the idle period %d", i))
	}
	for _, r := range []*running{pr.a, pr.b} {
		testutil.Eventually(t, 15*time.Second, func() bool { return dataplane.IdleParkedForTest(r.proxy) == 2*n },
			"the directions to park again")
	}
	for _, c := range cs {
		c.Close()
	}
	for _, r := range []*running{pr.a, pr.b} {
		testutil.Eventually(t, 15*time.Second, func() bool {
			return r.metric(t, "tcp_open_connections") == 0 && dataplane.IdleParkedForTest(r.proxy) == 0
		}, "every connection closed once")
	}
}

func TestShutdownClosesParkedConnectionsAndLeavesNoGoroutines(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	short := func(c *dataplane.Config) { c.ShutdownGracePeriod = 100 * time.Millisecond }
	pr := startPair(t, pairOptions{noTap: true, cfgA: short, cfgB: short})
	cs := openIdle(t, pr, 10)
	pr.a.stop(t)
	pr.b.stop(t)
	for _, c := range cs {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		b, err := io.ReadAll(c)
		assert.NoError(t, err, "the proxy closed the connection")
		assert.Empty(t, b)
		c.Close()
	}
	pr.app.ln.Close()
	noLeakedGoroutines(t, ignore)
}
