//go:build linux

package l4

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
)

// The proxy's side of the relay: a drain (closeAll) ends the pipes of
// tracked connections whole, parked directions included. The relay's own
// behaviour is tested in internal/relay.

// newIdleProxy is a Proxy with only what pipe needs: the tracked
// connections and an idle poller (stopped at the end of the test).
func newIdleProxy(t *testing.T) (*Paths, *relay.Poller) {
	t.Helper()
	ip, err := relay.NewPoller()
	require.NoError(t, err)
	t.Cleanup(ip.Stop)
	p := &Paths{conns: map[net.Conn]*relay.Pipe{}, idleLinger: 20 * time.Millisecond}
	p.idle.Store(ip)
	return p, ip
}

// trackedPipe is a pipe of a connection the proxy tracks, between two
// loopback connections whose other ends the test holds (app, srv).
type trackedPipe struct {
	app, srv net.Conn
	done     atomic.Int32
}

func newTrackedPipe(t *testing.T, p *Paths) *trackedPipe {
	t.Helper()
	app, client := testutil.TCPPair(t)
	server, srv := testutil.TCPPair(t)
	tp := &trackedPipe{app: app, srv: srv}
	require.True(t, p.track(client))
	stats := func() *connmetrics.Conn {
		return &connmetrics.Conn{ReadBytes: &metricstore.Series{}, WrittenBytes: &metricstore.Series{}}
	}
	p.pipe(client, client, server, stats(), stats(), func() {
		tp.done.Add(1)
		p.untrack(client)
	})
	return tp
}

func TestClosingTrackedConnectionsEndsParkedPipes(t *testing.T) {
	p, ip := newIdleProxy(t)
	var pipes []*trackedPipe
	for i := 0; i < 10; i++ {
		pipes = append(pipes, newTrackedPipe(t, p))
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return ip.Parked() == 20 }, "20 parked directions")
	assert.Equal(t, 10, p.closeAll())
	drained := make(chan struct{})
	go func() { p.active.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain did not end")
	}
	for _, tp := range pipes {
		assert.EqualValues(t, 1, tp.done.Load())
		for _, c := range []net.Conn{tp.app, tp.srv} {
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			b, err := io.ReadAll(c)
			require.NoError(t, err)
			assert.Empty(t, b, "the proxy closed its side")
		}
	}
	assert.Equal(t, 0, ip.Parked())
}
