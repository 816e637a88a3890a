package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// The HTTP/1.1 connections to one peer proxy's endpoint, and how they
// are shared.
//
// peerH1ConnsPerClient bounds the connections one downstream client's
// requests hold at once (its share): its next request waits for one of
// its own to come back rather than take the rest of the pool. 64 matches
// the inbound side's cost per connection (one goroutine, the TLS state)
// to what a peer may reasonably hold from one client, and is what the
// whole pool held before clients were told apart: a single client (the
// usual case on the outbound side: every request comes from the local
// application) can do what it always could.
//
// maxPeerH1ConnsPerEndpoint bounds the pool (idle and busy): two shares,
// so that whatever one client holds (uploads trickling for ever, say),
// as many connections are left for the others.
//
// Who a downstream client is: on the outbound side, where every request
// comes from the application's side of the pod, the source IP address
// of the connection the request came on (IPv4-mapped addresses
// unmapped). In a pod that is one client, the application; several
// appear where one outbound proxy serves several hosts (a shared egress,
// a local mesh whose applications have addresses of their own). The
// inbound side does not use this pool: it reaches the application over
// appH1, which has no bound and therefore no wait (each request may open
// a connection of its own; the application's own limits apply). A
// requester the proxy cannot tell apart (a meshed ingress's clients, all
// behind the ingress's one address) shares the one client's share; what
// it gets past it is the wait deadline: an answer within
// HTTPPoolWaitTimeout, 503 with l5d-proxy-error "pool-timeout", never an
// unbounded wait.
const (
	peerH1ConnsPerClient      = 64
	maxPeerH1ConnsPerEndpoint = 2 * peerH1ConnsPerClient
)

// DefaultWaitTimeout is dataplane.Config.HTTPPoolWaitTimeout's default:
// how long a request waits for a pooled connection. Linkerd's proxy answers
// an outbound request its queue could not serve after 3 s (its
// failfast timeout); a pooled connection of a healthy peer comes back
// within milliseconds, so a wait that long means the peer, or one
// client's use of it, is stuck.
const DefaultWaitTimeout = 3 * time.Second

// PeerH1Pool keeps HTTP/1.1 connections over mesh TLS to peer proxies:
// the hop an HTTP/1.1 request takes to a meshed endpoint unless the
// proxy is configured to carry it over HTTP/2 (Config.HTTP1OverH2). Each
// connection is dialled as the HTTP/2 hop's are (mutual TLS, the peer's
// identity verified, the transport header naming the application port),
// with the transport header announcing HTTP/1. One request at a time per
// connection; up to maxPeerH1ConnsPerEndpoint per endpoint.
type PeerH1Pool struct {
	d      Dialer
	s      Settings
	mu     sync.Mutex
	m      map[Key]*peerH1Entry
	closed bool
}

// peerH1Entry is one endpoint's client; addr is its address as the
// client's key (the client serves that one address).
type peerH1Entry struct {
	cl       *h1.Client
	addr     string
	inflight atomic.Int32 // requests between entry and the end of RoundTrip
}

// NewPeerH1 returns an empty HTTP/1.1 pool to peer proxies that dials
// through d (Peer, then Count) and takes its idle timeout, wait deadline
// and header limit from s.
func NewPeerH1(d Dialer, s Settings) *PeerH1Pool {
	return &PeerH1Pool{d: d, s: s, m: map[Key]*peerH1Entry{}}
}

// peerH1IdleTimeout is how long a connection to a peer proxy stays idle
// in the pool: half the proxy's own HTTP idle timeout, so that with equal
// settings this side closes an idle connection well before the peer's
// inbound server does and a request rarely meets a connection the peer
// is closing.
func (pp *PeerH1Pool) idleTimeout() time.Duration {
	d := pp.s.IdleTimeout / 2
	if d <= 0 || d > 90*time.Second {
		d = 90 * time.Second
	}
	return d
}

// waitTimeout is how long a request waits for a pooled connection.
func (pp *PeerH1Pool) waitTimeout() time.Duration {
	if d := pp.s.WaitTimeout; d > 0 {
		return d
	}
	return DefaultWaitTimeout
}

// entry returns the client for key, made on first use with dl for the
// connections it dials.
func (pp *PeerH1Pool) entry(key Key, dl Labels) (*peerH1Entry, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.closed {
		return nil, &httpcore.DialError{Err: errors.New("dataplane: proxy is stopping")}
	}
	if e := pp.m[key]; e != nil {
		e.inflight.Add(1)
		return e, nil
	}
	d := pp.d
	e := &peerH1Entry{addr: key.Addr.String()}
	e.cl = &h1.Client{
		Dial: func(ctx context.Context, _ string) (net.Conn, error) {
			conn, err := d.Peer(ctx, key.peer(), transport.HTTP1)
			if err != nil {
				return nil, fmt.Errorf("dataplane: connecting to %s: %w", key.Addr, err)
			}
			return d.Count(conn, dl), nil
		},
		Reusable:          peerConnReusable,
		MaxIdlePerAddr:    maxPeerH1ConnsPerEndpoint,
		MaxConnsPerAddr:   maxPeerH1ConnsPerEndpoint,
		MaxConnsPerClient: peerH1ConnsPerClient,
		WaitTimeout:       pp.waitTimeout(),
		IdleTimeout:       pp.idleTimeout(),
		Limits:            h1.Limits{MaxHeaderBytes: pp.s.MaxHeaderBytes},
		OmitTrailer:       httpcore.IsMeshHeader,
	}
	pp.m[key] = e
	e.inflight.Add(1)
	return e, nil
}

// RoundTrip sends req, a request of the downstream client from, to the
// peer proxy of key; a connection it dials is counted with dl. A failure
// to connect is an *httpcore.DialError (the request was not sent); so is
// a wait for a connection that the request's context ended. A wait past
// the pool's deadline is returned as the client's *h1.PoolTimeoutError
// (not sent either, but not the endpoint's fault: the caller answers it
// without trying another endpoint). The client itself sends a request
// once more, on a new connection, only when a kept-alive one failed
// before any byte of the response and the request has no body and is
// idempotent.
func (pp *PeerH1Pool) RoundTrip(key Key, req *http.Request, from netip.Addr, dl Labels) (*http.Response, error) {
	e, err := pp.entry(key, dl)
	if err != nil {
		return nil, err
	}
	resp, err := e.cl.RoundTripFrom(req, e.addr, from.Unmap())
	e.inflight.Add(-1)
	if err != nil {
		var de *h1.DialError
		var pe *h1.PoolTimeoutError
		switch {
		case errors.As(err, &pe):
			return nil, pe
		case errors.As(err, &de):
			return nil, &httpcore.DialError{Err: err}
		}
	}
	return resp, err
}

// Sweep closes connections idle past the idle timeout and forgets
// endpoints without open connections or requests on their way (a request
// counts from entry on, under pp.mu, so that none dials in a forgotten
// client).
func (pp *PeerH1Pool) Sweep() {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for k, e := range pp.m {
		e.cl.Sweep()
		if e.inflight.Load() == 0 && e.cl.Open(e.addr) == 0 {
			delete(pp.m, k)
		}
	}
}

// CloseAll closes every idle connection and refuses new requests (an
// *httpcore.DialError); busy connections close when their exchange ends.
func (pp *PeerH1Pool) CloseAll() {
	pp.mu.Lock()
	pp.closed = true
	m := pp.m
	pp.m = map[Key]*peerH1Entry{}
	pp.mu.Unlock()
	for _, e := range m {
		e.cl.CloseIdle(true)
	}
}

// Waiting reports the requests waiting for a pooled connection, for
// tests and diagnostics.
func (pp *PeerH1Pool) Waiting() int {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	n := 0
	for _, e := range pp.m {
		n += e.cl.Waiting()
	}
	return n
}

// peerIdleState is what an idle connection's socket holds
// (relay.PeekIdle).
type peerIdleState = relay.IdleState

const (
	peerOpen   = relay.IdleOpen   // nothing to read
	peerClosed = relay.IdleClosed // the end of the stream, or an error
	peerBytes  = relay.IdleBytes  // bytes to read
)

// peerCheckAfter is how long a connection must have been idle before it
// is checked for a close by the peer on reuse. Under load connections
// are reused within microseconds and are not checked (a system call per
// request); one idle for longer may have been closed by the peer (its
// idle timeout, a drain, a restart), and a request sent on it could not
// be retried unless idempotent and without body.
const peerCheckAfter = 5 * time.Millisecond

// PlainConnReusable reports whether an idle plaintext connection (to the
// application, or to an endpoint outside the mesh) may carry another
// request: not when the server closed it or sent bytes nobody asked for.
// As for peers, only a connection idle for longer than peerCheckAfter is
// checked, with one peek at its socket.
func PlainConnReusable(c net.Conn, idle time.Duration) bool {
	if idle < peerCheckAfter {
		return true
	}
	rc := h1.SocketOf(c)
	if rc == nil {
		return true
	}
	return peekSocket(rc) == peerOpen
}

// peekSocket tells what an idle socket holds without waiting or consuming
// anything; a socket that cannot be read is closed.
func peekSocket(rc syscall.RawConn) peerIdleState {
	state := peerOpen
	if err := rc.Read(func(fd uintptr) bool { state = relay.PeekIdle(fd); return true }); err != nil {
		return peerClosed
	}
	return state
}

// peerConnReusable reports whether an idle connection to a peer proxy
// may carry another request: not when the peer closed it. A peek at the
// socket tells most cases without reading: nothing waiting (open), or
// the end of the stream. Bytes waiting are read through TLS, within a
// millisecond: the peer's close_notify alert
// (closed), a post-handshake message TLS consumes itself (open), or
// response bytes nobody asked for (closed: the connection is out of
// step).
func peerConnReusable(c net.Conn, idle time.Duration) bool {
	if idle < peerCheckAfter {
		return true
	}
	tc := tlsUnder(c)
	if tc == nil {
		return true
	}
	raw, ok := tc.NetConn().(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := raw.SyscallConn()
	if err != nil {
		return false
	}
	switch peekSocket(rc) {
	case peerOpen:
		return true
	case peerClosed:
		return false
	}
	// Go fails a read whose deadline has passed before trying it: the
	// deadline is a millisecond away, which bytes already waiting never
	// reach.
	if tc.SetReadDeadline(time.Now().Add(time.Millisecond)) != nil {
		return false
	}
	var b [1]byte
	n, err := tc.Read(b[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	return tc.SetReadDeadline(time.Time{}) == nil
}

// tlsUnder returns the mesh TLS connection a pooled peer connection
// wraps: Dialer.Count's wrapper, whose NetConn method returns the
// *tls.Conn Dialer.Peer dialled. Nil for any other shape, whose check
// is skipped (the connection is taken as reusable).
func tlsUnder(c net.Conn) *tls.Conn {
	w, ok := c.(interface{ NetConn() net.Conn })
	if !ok {
		return nil
	}
	tc, _ := w.NetConn().(*tls.Conn)
	return tc
}
