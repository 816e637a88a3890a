package tap

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The tap listener's front door. A connection holds one of the
// maxConns slots only once it is known to be a tapper's: the gate
// accepts every TCP connection, runs its TLS handshake under a short
// deadline (ServerConfig.HandshakeTimeout) in a bounded stage
// (maxHandshakes at once, maxHandshakesPerClient from one client
// address), checks the client certificate's identity against
// ServerConfig.Identities, and closes at once a connection that fails any
// step. Only then does the connection take a slot and reach the HTTP/2
// server. A silent client, a client without a certificate, or a meshed
// client of another identity holds a handshake place for at most the
// handshake bound and never a slot; the slots are held by tappers only.
// Every refusal is counted in tcp_refused_total{direction="tap"}.

const (
	// maxHandshakes bounds the TLS handshakes the tap listener runs at
	// once; a connection beyond it is closed at once.
	maxHandshakes = 16
	// maxHandshakesPerClient bounds them per client address, so that
	// one client cannot take the whole stage.
	maxHandshakesPerClient = 4
	// DefaultHandshakeTimeout is the handshake bound when none is configured
	// (the dataplane package's Config.TapHandshakeTimeout default).
	DefaultHandshakeTimeout = 3 * time.Second
)

// Reasons the tap listener refuses a connection (tcp_refused_total,
// direction="tap"). The first three are the values the proxy's other
// listeners report for the same causes (the dataplane package's refuse*
// constants); the tap tests read them back from the metric.
const (
	refuseHandshake         = "tls-handshake"        // the TLS handshake failed, or did not negotiate h2
	refuseTooMany           = "too-many-connections" // every slot is held by tappers
	refuseTooManyFromClient = "too-many-from-client" // the client address has its share of the handshake stage

	refuseNotTapper         = "not-a-tapper"        // a verified identity that is not in TapIdentities
	refuseTooManyHandshakes = "too-many-handshakes" // the handshake stage is full
)

// gate is the tap server's listener: Accept returns only TLS
// connections of accepted tappers, their handshake done, each holding a
// slot until the server reports it closed (release).
type gate struct {
	l   net.Listener
	cfg *ServerConfig
	hub *Hub

	ready chan *tls.Conn
	done  chan struct{}
	stop  sync.Once
	wg    sync.WaitGroup // the accept loop and the handshakes

	mu          sync.Mutex
	closed      bool
	handshaking int
	byClient    map[netip.Addr]int
	slots       map[net.Conn]struct{}
}

func newGate(l net.Listener, cfg *ServerConfig, hub *Hub) *gate {
	return &gate{
		l: l, cfg: cfg, hub: hub,
		ready: make(chan *tls.Conn), done: make(chan struct{}),
		byClient: map[netip.Addr]int{}, slots: map[net.Conn]struct{}{},
	}
}

// run accepts connections until the gate is closed; ctx ends the
// handshakes under way.
func (g *gate) run(ctx context.Context) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		var backoff time.Duration
		for {
			c, err := g.l.Accept()
			if err != nil {
				if g.isClosed() || errors.Is(err, net.ErrClosed) {
					return
				}
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				g.cfg.Log.Warn("tap accept failed", "err", err, "retry_in", backoff)
				select {
				case <-time.After(backoff):
				case <-g.done:
					return
				}
				continue
			}
			backoff = 0
			g.admit(ctx, c)
		}
	}()
}

// admit starts c's handshake when the stage has room for it, or closes c.
func (g *gate) admit(ctx context.Context, c net.Conn) {
	var client netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		client = ta.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	reason := ""
	switch {
	case g.closed:
		reason = "closed"
	case g.handshaking >= maxHandshakes:
		reason = refuseTooManyHandshakes
	case g.byClient[client] >= maxHandshakesPerClient:
		reason = refuseTooManyFromClient
	default:
		g.handshaking++
		g.byClient[client]++
		g.hub.handshakes.Store(int32(g.handshaking))
		g.wg.Add(1)
	}
	g.mu.Unlock()
	if reason != "" {
		if reason != "closed" {
			g.cfg.Refused(reason) // counted before the client can see the close
		}
		c.Close()
		return
	}
	go func() {
		defer g.wg.Done()
		g.handshake(ctx, c, client)
	}()
}

// handshake runs c's TLS handshake within the bound, checks the client's
// identity, and hands the connection to the server with a slot, or
// closes it.
func (g *gate) handshake(ctx context.Context, c net.Conn, client netip.Addr) {
	// The deadline bounds the handshake; ctx ends it when the server
	// stops. The gate closes the connection itself, after counting.
	tc := tls.Server(c, g.cfg.TLS)
	_ = c.SetDeadline(time.Now().Add(g.cfg.HandshakeTimeout))
	err := tc.HandshakeContext(ctx)
	_ = c.SetDeadline(time.Time{})

	g.mu.Lock()
	g.handshaking--
	if g.byClient[client]--; g.byClient[client] <= 0 {
		delete(g.byClient, client)
	}
	g.hub.handshakes.Store(int32(g.handshaking))
	g.mu.Unlock()

	cs := tc.ConnectionState()
	id := g.cfg.Identity(cs)
	reason := ""
	switch {
	case err != nil:
		reason = refuseHandshake
	case cs.NegotiatedProtocol != "h2":
		reason, err = refuseHandshake, errors.New("the client did not negotiate h2")
	case id == "" || !slices.Contains(g.cfg.Identities, id):
		reason = refuseNotTapper
	}
	if reason != "" {
		// The socket itself: no close_notify, which a client that does
		// not read could hold for tls.Conn.Close's 5 s. A handshake the
		// server's stop ended is not a refusal.
		if ctx.Err() == nil {
			g.cfg.Refused(reason)
		}
		c.Close()
		g.cfg.Log.Debug("tap connection refused", "client", c.RemoteAddr().String(), "reason", reason, "client_id", id, "err", err)
		return
	}

	g.mu.Lock()
	switch {
	case g.closed:
		reason = "closed"
	case len(g.slots) >= maxConns:
		reason = refuseTooMany
	default:
		g.slots[tc] = struct{}{}
		g.hub.conns.Store(int32(len(g.slots)))
	}
	g.mu.Unlock()
	if reason != "" {
		if reason != "closed" {
			g.cfg.Refused(reason)
			g.cfg.Log.Info("tap connection refused: every slot is held by tappers", "client_id", id, "slots", maxConns)
		}
		c.Close()
		return
	}
	select {
	case g.ready <- tc:
	case <-g.done:
		g.release(tc)
		tc.Close()
	}
}

// release frees the slot c holds, if any; the server calls it when c
// closes.
func (g *gate) release(c net.Conn) {
	g.mu.Lock()
	if _, ok := g.slots[c]; ok {
		delete(g.slots, c)
		g.hub.conns.Store(int32(len(g.slots)))
	}
	g.mu.Unlock()
}

func (g *gate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Accept returns the next tapper's connection.
func (g *gate) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections in their handshake end with it or
// with the run's context.
func (g *gate) Close() error {
	var err error
	g.stop.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.done)
		err = g.l.Close()
	})
	return err
}

// wait returns once the accept loop and every handshake returned.
func (g *gate) wait() { g.wg.Wait() }

// Addr is the listener's address.
func (g *gate) Addr() net.Addr { return g.l.Addr() }
