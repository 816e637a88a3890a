package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The tap listener's front door. A connection holds one of the
// tapMaxConns slots only once it is known to be a tapper's: the gate
// accepts every TCP connection, runs its TLS handshake under a short
// deadline (Config.TapHandshakeTimeout) in a bounded stage
// (tapMaxHandshakes at once, tapMaxHandshakesPerClient from one client
// address), checks the client certificate's identity against
// Config.TapIdentities, and closes at once a connection that fails any
// step. Only then does the connection take a slot and reach the HTTP/2
// server. A silent client, a client without a certificate, or a meshed
// client of another identity holds a handshake place for at most the
// handshake bound and never a slot; the slots are held by tappers only.
// Every refusal is counted in tcp_refused_total{direction="tap"}.

const (
	// tapMaxHandshakes bounds the TLS handshakes the tap listener runs at
	// once; a connection beyond it is closed at once.
	tapMaxHandshakes = 16
	// tapMaxHandshakesPerClient bounds them per client address, so that
	// one client cannot take the whole stage.
	tapMaxHandshakesPerClient = 4
	// defaultTapHandshakeTimeout is Config.TapHandshakeTimeout's default.
	defaultTapHandshakeTimeout = 3 * time.Second
)

// Reasons the tap listener refuses a connection (tcp_refused_total,
// direction="tap"), besides refuseHandshake, refuseTooMany (every slot
// held by tappers) and refuseTooManyFromClient.
const (
	refuseNotTapper         = "not-a-tapper"        // a verified identity that is not in TapIdentities
	refuseTooManyHandshakes = "too-many-handshakes" // the handshake stage is full
)

// tapGate is the tap server's listener: Accept returns only TLS
// connections of accepted tappers, their handshake done, each holding a
// slot until the server reports it closed (release).
type tapGate struct {
	l       net.Listener
	tls     *tls.Config
	allowed []string
	timeout time.Duration
	hub     *tapHub
	refused func(reason string)
	log     *slog.Logger

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

func newTapGate(l net.Listener, cfg *tls.Config, allowed []string, timeout time.Duration, hub *tapHub,
	refused func(string), log *slog.Logger) *tapGate {
	return &tapGate{
		l: l, tls: cfg, allowed: allowed, timeout: timeout, hub: hub, refused: refused, log: log,
		ready: make(chan *tls.Conn), done: make(chan struct{}),
		byClient: map[netip.Addr]int{}, slots: map[net.Conn]struct{}{},
	}
}

// run accepts connections until the gate is closed; ctx ends the
// handshakes under way.
func (g *tapGate) run(ctx context.Context) {
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
				g.log.Warn("tap accept failed", "err", err, "retry_in", backoff)
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
func (g *tapGate) admit(ctx context.Context, c net.Conn) {
	var client netip.Addr
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		client = ta.AddrPort().Addr().Unmap()
	}
	g.mu.Lock()
	reason := ""
	switch {
	case g.closed:
		reason = "closed"
	case g.handshaking >= tapMaxHandshakes:
		reason = refuseTooManyHandshakes
	case g.byClient[client] >= tapMaxHandshakesPerClient:
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
			g.refused(reason) // counted before the client can see the close
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
func (g *tapGate) handshake(ctx context.Context, c net.Conn, client netip.Addr) {
	// The deadline bounds the handshake; ctx ends it when the server
	// stops. The gate closes the connection itself, after counting.
	tc := tls.Server(c, g.tls)
	_ = c.SetDeadline(time.Now().Add(g.timeout))
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
	id := PeerIdentity(cs)
	reason := ""
	switch {
	case err != nil:
		reason = refuseHandshake
	case cs.NegotiatedProtocol != "h2":
		reason, err = refuseHandshake, errors.New("the client did not negotiate h2")
	case id == "" || !slices.Contains(g.allowed, id):
		reason = refuseNotTapper
	}
	if reason != "" {
		// The socket itself: no close_notify, which a client that does
		// not read could hold for tls.Conn.Close's 5 s. A handshake the
		// server's stop ended is not a refusal.
		if ctx.Err() == nil {
			g.refused(reason)
		}
		c.Close()
		g.log.Debug("tap connection refused", "client", c.RemoteAddr().String(), "reason", reason, "client_id", id, "err", err)
		return
	}

	g.mu.Lock()
	switch {
	case g.closed:
		reason = "closed"
	case len(g.slots) >= tapMaxConns:
		reason = refuseTooMany
	default:
		g.slots[tc] = struct{}{}
		g.hub.conns.Store(int32(len(g.slots)))
	}
	g.mu.Unlock()
	if reason != "" {
		if reason != "closed" {
			g.refused(reason)
			g.log.Info("tap connection refused: every slot is held by tappers", "client_id", id, "slots", tapMaxConns)
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
func (g *tapGate) release(c net.Conn) {
	g.mu.Lock()
	if _, ok := g.slots[c]; ok {
		delete(g.slots, c)
		g.hub.conns.Store(int32(len(g.slots)))
	}
	g.mu.Unlock()
}

func (g *tapGate) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Accept returns the next tapper's connection.
func (g *tapGate) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections in their handshake end with it or
// with the run's context.
func (g *tapGate) Close() error {
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
func (g *tapGate) wait() { g.wg.Wait() }

// Addr is the listener's address.
func (g *tapGate) Addr() net.Addr { return g.l.Addr() }
