//go:build linux

package relay

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// testLinger is the quiet time before a direction parks in these tests.
const testLinger = 20 * time.Millisecond

// newPoller is an idle poller, stopped at the end of the test.
func newPoller(t *testing.T) *Poller {
	t.Helper()
	ip, err := NewPoller()
	require.NoError(t, err)
	t.Cleanup(ip.Stop)
	return ip
}

// counter counts bytes as a transport series does.
type counter struct{ n atomic.Uint64 }

func (c *counter) Add(v float64) { c.n.Add(uint64(v)) }

// sideStats records the first error of one side, as the proxy's
// connection series do.
type sideStats struct{ failure atomic.Pointer[error] }

func (s *sideStats) Fail(err error) {
	if err != nil {
		s.failure.CompareAndSwap(nil, &err)
	}
}

// testPipe is a pipe between two loopback connections: the test holds app
// (the client's end) and srv (the server's end).
type testPipe struct {
	app, srv           net.Conn
	ps                 *Pipe
	toClient, toServer counter
	stats              *sideStats // the client connection's
	dstStats           *sideStats // the server connection's
	done               atomic.Int32
	ended              chan struct{}
}

// startPipe pipes client to server, as a proxy does.
func startPipe(t *testing.T, ip *Poller, app, client, srv, server net.Conn) *testPipe {
	t.Helper()
	tp := &testPipe{app: app, srv: srv, ended: make(chan struct{}), stats: &sideStats{}, dstStats: &sideStats{}}
	tp.ps = NewPipe(ip, testLinger, Ends{
		Client: client, Server: server, ToClient: &tp.toClient, ToServer: &tp.toServer,
		ClientStats: tp.stats, ServerStats: tp.dstStats,
	}, func() {
		if tp.done.Add(1) == 1 {
			close(tp.ended)
		}
	})
	tp.ps.Start()
	return tp
}

func newPlainPipe(t *testing.T, ip *Poller) *testPipe {
	app, client := testutil.TCPPair(t)
	server, srv := testutil.TCPPair(t)
	return startPipe(t, ip, app, client, srv, server)
}

func (tp *testPipe) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-tp.ended:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("the pipe did not end\n%s", buf[:runtime.Stack(buf, true)])
	}
}

func waitParked(t *testing.T, ip *Poller, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() bool { return ip.Parked() == n },
		fmt.Sprintf("%d parked directions", n))
}

// readN reads exactly n bytes from c under a deadline.
func readN(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	require.NoError(t, err)
	return string(b)
}

// readEOF reads c to its end under a deadline and returns what came.
func readEOF(t *testing.T, c net.Conn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	b, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(b)
}

func TestIdlePipesHoldNoGoroutineAndDeliverAfterParking(t *testing.T) {
	ip := newPoller(t)
	const n = 60
	g0 := runtime.NumGoroutine()
	var pipes []*testPipe
	for i := 0; i < n; i++ {
		pipes = append(pipes, newPlainPipe(t, ip))
	}
	waitParked(t, ip, 2*n)
	// The directions' goroutines exited when they parked; what is left
	// is not per connection.
	testutil.Eventually(t, 10*time.Second, func() bool { return runtime.NumGoroutine()-g0 <= 2 },
		"the parked directions' goroutines to exit")

	for round := 0; round < 2; round++ {
		for i, tp := range pipes {
			up, down := fmt.Sprintf("up %d.%d", round, i), fmt.Sprintf("down %d.%d", round, i)
			_, err := io.WriteString(tp.app, up)
			require.NoError(t, err)
			_, err = io.WriteString(tp.srv, down)
			require.NoError(t, err)
			assert.Equal(t, up, readN(t, tp.srv, len(up)))
			assert.Equal(t, down, readN(t, tp.app, len(down)))
		}
		waitParked(t, ip, 2*n)
	}
	for _, tp := range pipes {
		tp.app.Close()
		tp.srv.Close()
	}
	for _, tp := range pipes {
		tp.waitEnded(t)
		assert.EqualValues(t, 1, tp.done.Load())
	}
	waitParked(t, ip, 0)
}

func TestHalfCloseOfAParkedDirectionLeavesTheOtherWorking(t *testing.T) {
	ip := newPoller(t)
	tp := newPlainPipe(t, ip)
	waitParked(t, ip, 2)
	require.NoError(t, tp.app.(*net.TCPConn).CloseWrite())
	assert.Equal(t, "", readEOF(t, tp.srv), "the server sees the client's FIN")
	waitParked(t, ip, 1) // the reply direction is still parked
	_, err := io.WriteString(tp.srv, "answer after the half-close")
	require.NoError(t, err)
	assert.Equal(t, "answer after the half-close", readN(t, tp.app, len("answer after the half-close")))
	require.NoError(t, tp.srv.(*net.TCPConn).CloseWrite())
	assert.Equal(t, "", readEOF(t, tp.app))
	tp.waitEnded(t)
	assert.EqualValues(t, 1, tp.done.Load())
	waitParked(t, ip, 0)
}

func TestAFailedDirectionEndsTheParkedOneOnce(t *testing.T) {
	ip := newPoller(t)
	tp := newPlainPipe(t, ip)
	waitParked(t, ip, 2)
	// The server resets: its direction wakes with an error and closes
	// both connections; the client's, parked, sees no socket event.
	require.NoError(t, tp.srv.(*net.TCPConn).SetLinger(0))
	require.NoError(t, tp.srv.Close())
	tp.waitEnded(t)
	assert.Equal(t, "", readEOF(t, tp.app), "the client's connection is closed")
	waitParked(t, ip, 0)
	assert.EqualValues(t, 1, tp.done.Load())
	require.NotNil(t, tp.dstStats.failure.Load(), "the reset is recorded on the server connection's series")
	assert.ErrorIs(t, *tp.dstStats.failure.Load(), syscall.ECONNRESET)
	assert.Nil(t, tp.stats.failure.Load(), "the client's connection did not fail")
}

func TestReusedDescriptorsDoNotCrossParkedPipes(t *testing.T) {
	ip := newPoller(t)
	for gen := 0; gen < 3; gen++ {
		var pipes []*testPipe
		for i := 0; i < 30; i++ {
			pipes = append(pipes, newPlainPipe(t, ip))
		}
		waitParked(t, ip, 60)
		for i, tp := range pipes {
			msg := fmt.Sprintf("gen %d pipe %d", gen, i)
			_, err := io.WriteString(tp.app, msg)
			require.NoError(t, err)
			assert.Equal(t, msg, readN(t, tp.srv, len(msg)))
		}
		waitParked(t, ip, 60)
		// Half of them closed by their peers, half by the proxy: the
		// descriptors are free for the next generation.
		for i, tp := range pipes {
			if i%2 == 0 {
				tp.app.Close()
				tp.srv.Close()
			}
		}
		for _, tp := range pipes { // as the proxy's drain does
			tp.ps.Close()
		}
		for _, tp := range pipes {
			tp.waitEnded(t)
			assert.EqualValues(t, 1, tp.done.Load())
		}
		waitParked(t, ip, 0)
	}
}

func TestAStoppedPollerHandsParkedDirectionsBackToGoroutines(t *testing.T) {
	ip := newPoller(t)
	tp := newPlainPipe(t, ip)
	waitParked(t, ip, 2)
	ip.Stop()
	_, err := io.WriteString(tp.app, "after the stop")
	require.NoError(t, err)
	assert.Equal(t, "after the stop", readN(t, tp.srv, len("after the stop")))
	tp.app.Close()
	tp.srv.Close()
	tp.waitEnded(t)
}

// gatedConn holds what the TLS server writes after its first flight until
// the test releases it.
type gatedConn struct {
	net.Conn
	mu     sync.Mutex
	writes int
	held   []byte
	open   bool // everything held went out; writes pass
}

// openUp releases what is held and lets later writes through.
func (g *gatedConn) openUp(t *testing.T) {
	t.Helper()
	g.release(t, -1)
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
}

func (g *gatedConn) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	if g.writes == 1 || g.open {
		return g.Conn.Write(b)
	}
	g.held = append(g.held, b...)
	return len(b), nil
}

// release sends the first n held bytes (all when n < 0).
func (g *gatedConn) release(t *testing.T, n int) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n < 0 || n > len(g.held) {
		n = len(g.held)
	}
	_, err := g.Conn.Write(g.held[:n])
	require.NoError(t, err)
	g.held = g.held[n:]
}

func (g *gatedConn) heldLen() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held)
}

// newTLSPipe pipes a plaintext client to a mutual TLS 1.3 server, as
// the outbound proxy does: the pipe's server connection is the TLS client
// end, whose server's writes after its first flight pass through gate.
func newTLSPipe(t *testing.T, ip *Poller) (*testPipe, *tls.Conn, *gatedConn) {
	t.Helper()
	anchor := testutil.NewAnchor(t, testutil.CertOptions{Name: "root.test"})
	cliCert := anchor.Leaf(t, testutil.CertOptions{Name: "client.test"})
	srvCert := anchor.Leaf(t, testutil.CertOptions{Name: "server.test"})
	pool := testutil.Pool(anchor)

	raw, srvRaw := testutil.TCPPair(t)
	gate := &gatedConn{Conn: srvRaw}
	srv := tls.Server(gate, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{srvCert.TLS},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	server := tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cliCert.TLS},
		RootCAs: pool, ServerName: "server.test", ClientSessionCache: tls.NewLRUClientSessionCache(1)})
	ctx := testutil.Context(t, 10*time.Second)
	errc := make(chan error, 1)
	go func() { errc <- srv.HandshakeContext(ctx) }()
	require.NoError(t, server.HandshakeContext(ctx))
	require.NoError(t, <-errc)
	app, client := testutil.TCPPair(t)
	return startPipe(t, ip, app, client, srv, server), srv, gate
}

func TestAParkedTLSDirectionReparksAfterWakeUpsWithoutData(t *testing.T) {
	ip := newPoller(t)
	tp, srv, gate := newTLSPipe(t, ip)
	app := tp.app
	// With client certificates, a TLS 1.3 server sends its session
	// tickets after the client's Finished: held back, they reach the
	// proxy's side only once it parked.
	require.NotZero(t, gate.heldLen(), "the server's session tickets are held")
	waitParked(t, ip, 2)

	woken := ip.Woken()
	gate.release(t, -1) // the tickets alone
	testutil.Eventually(t, 10*time.Second, func() bool { return ip.Woken() == woken+1 }, "the wake-up")
	waitParked(t, ip, 2)

	// A record in two parts: the first wakes the direction, which reads
	// no data and parks again with the part buffered.
	_, err := srv.Write([]byte("a record in two parts"))
	require.NoError(t, err)
	woken = ip.Woken()
	gate.release(t, 3)
	testutil.Eventually(t, 10*time.Second, func() bool { return ip.Woken() == woken+1 }, "the wake-up")
	waitParked(t, ip, 2)
	gate.release(t, -1)
	assert.Equal(t, "a record in two parts", readN(t, app, len("a record in two parts")))

	_, err = io.WriteString(app, "and back")
	require.NoError(t, err)
	assert.Equal(t, "and back", readN(t, srv, len("and back")))
	waitParked(t, ip, 2)

	app.Close()
	assert.Equal(t, "", readEOF(t, srv), "close_notify from the proxy's side")
	gate.openUp(t)
	require.NoError(t, srv.CloseWrite())
	tp.waitEnded(t)
	assert.EqualValues(t, 1, tp.done.Load())
	waitParked(t, ip, 0)
}

func TestAStreamLongerThanTheLingerFlowsWithoutABreak(t *testing.T) {
	ip := newPoller(t)
	tp := newPlainPipe(t, ip)
	// The server reads slowly, so the proxy's reads keep finding a full
	// socket: the copy never drains for many lingers in a row.
	const total = 8 << 20
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	wrote := make(chan error, 1)
	go func() {
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := tp.app.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- tp.app.(*net.TCPConn).CloseWrite()
	}()
	assert.Equal(t, total, slowCount(t, tp.srv))
	require.NoError(t, <-wrote)
	assert.Nil(t, tp.stats.failure.Load())
}

func TestATLSStreamLongerThanTheLingerFlowsWithoutABreak(t *testing.T) {
	ip := newPoller(t)
	tp, srv, gate := newTLSPipe(t, ip)
	gate.openUp(t)
	const total = 8 << 20
	chunk := make([]byte, 64<<10)
	wrote := make(chan error, 1)
	go func() {
		for sent := 0; sent < total; sent += len(chunk) {
			if _, err := srv.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- srv.CloseWrite()
	}()
	assert.Equal(t, total, slowCount(t, tp.app))
	require.NoError(t, <-wrote)
	assert.Nil(t, tp.dstStats.failure.Load())
}

// slowCount reads c to its end 1 KiB at a time (a slow reader keeps the
// proxy's source socket full) and returns how many bytes came.
func slowCount(t *testing.T, c net.Conn) int {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	got := 0
	b := make([]byte, 1<<10)
	for {
		n, err := c.Read(b)
		got += n
		if err == io.EOF {
			return got
		}
		require.NoError(t, err)
	}
}
