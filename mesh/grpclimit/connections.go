package grpclimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Connections caps the connections a server holds open at once: in total,
// and per peer IP address. A connection beyond either cap is closed as
// soon as it is accepted, before any byte is read or any buffer allocated
// for it (no TLS handshake, no HTTP/2 settings), and counted in
// [Connections.Refused]; it is never queued, so a client that frees a
// place finds it at once. The connections already open are not touched.
// It is safe for concurrent use; one Connections may wrap several
// listeners so that they draw from one budget.
//
// The per-peer count is keyed by the peer's IP address (the whole address
// for non-IP transports). Clients behind one NAT share it.
type Connections struct {
	max, perPeer int

	mu    sync.Mutex
	total int
	peers map[string]int

	refused atomic.Uint64
}

// NewConnections returns a limiter of max connections in total and
// perPeer per peer address. A value of zero or less means no limit of that
// kind.
func NewConnections(max, perPeer int) *Connections {
	return &Connections{max: max, perPeer: perPeer, peers: map[string]int{}}
}

// InUse returns the number of connections open now.
func (c *Connections) InUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// Refused returns how many connections were closed at accept since the
// start.
func (c *Connections) Refused() uint64 { return c.refused.Load() }

// Listener returns l with the caps applied: its Accept returns only
// connections within them and closes the others. The caller still owns l;
// closing the returned listener closes l.
func (c *Connections) Listener(l net.Listener) net.Listener {
	return &capListener{Listener: l, c: c}
}

// admit counts a connection from key, or reports that a cap is reached.
func (c *Connections) admit(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (c.max > 0 && c.total >= c.max) || (c.perPeer > 0 && c.peers[key] >= c.perPeer) {
		c.refused.Add(1)
		return false
	}
	c.total++
	c.peers[key]++
	return true
}

func (c *Connections) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.peers[key]--; c.peers[key] <= 0 {
		delete(c.peers, key)
	}
}

type capListener struct {
	net.Listener
	c *Connections
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(conn.RemoteAddr())
		if !l.c.admit(key) {
			_ = conn.Close()
			continue
		}
		return &capConn{Conn: conn, release: sync.OnceFunc(func() { l.c.release(key) })}, nil
	}
}

// capConn gives its place back when it is closed (once, however often
// Close is called).
type capConn struct {
	net.Conn
	release func()
}

func (c *capConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// addrKey is the address a peer is counted under: its IP address, or the
// whole address for transports without one.
func addrKey(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}
