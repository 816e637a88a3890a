package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// Key names an upstream: a peer proxy reached with mesh TLS (Identity
// set, the transport header naming Port), or a plaintext server
// (Identity empty: h2c to the application or to an endpoint outside the
// mesh). It is a comparable value, the pools' map key.
type Key struct {
	Addr     netip.AddrPort // where to dial
	Identity string
	Port     uint16 // application port announced in the transport header
}

// peer is the endpoint a key with an identity dials: its proxy at Addr,
// the application port in the transport header.
func (k Key) peer() endpoint.Endpoint {
	return endpoint.Endpoint{Addr: netip.AddrPortFrom(k.Addr.Addr(), k.Port), Identity: k.Identity, OpaqueTransportPort: k.Addr.Port()}
}

// H2Pool keeps HTTP/2 client connections per upstream and shares them
// between requests. A new connection is dialled only when every existing
// one is at its stream limit (one dial at a time per upstream; requests
// that arrive meanwhile wait for it), up to maxConnsPerKey.
type H2Pool struct {
	d      Dialer
	opts   []h2client.Option
	mu     sync.Mutex
	m      map[Key]*poolEntry
	closed bool
}

type poolEntry struct {
	mu      sync.Mutex
	conns   []*h2client.Conn
	dialing *dialResult
}

type dialResult struct {
	done chan struct{}
	cc   *h2client.Conn
	err  error
}

// maxConnsPerKey bounds the connections to one upstream; beyond it
// requests queue for a stream on an existing connection.
const maxConnsPerKey = 8

// NewH2 returns an empty HTTP/2 pool that dials through d and makes each
// connection with s.H2 (h2client's options: windows, buffer limit,
// header size, keepalive, idle timeout).
func NewH2(d Dialer, s Settings) *H2Pool {
	return &H2Pool{d: d, opts: s.H2, m: map[Key]*poolEntry{}}
}

// Get returns a connection to key with a stream reserved for one request
// (or, with every connection at its stream limit and maxConnsPerKey
// open, the first one, whose RoundTrip waits for a stream). A connection
// it dials is counted with dl. A failure to connect, the pool closed or
// ctx ending while another request dials is an *httpcore.DialError.
func (cp *H2Pool) Get(ctx context.Context, key Key, dl Labels) (*h2client.Conn, error) {
	cp.mu.Lock()
	if cp.closed {
		cp.mu.Unlock()
		return nil, &httpcore.DialError{Err: errors.New("dataplane: proxy is stopping")}
	}
	e := cp.m[key]
	if e == nil {
		e = &poolEntry{}
		cp.m[key] = e
	}
	cp.mu.Unlock()

	for {
		e.mu.Lock()
		live := e.conns[:0]
		for _, cc := range e.conns {
			if st := cc.State(); !st.Closed && !st.Closing {
				live = append(live, cc)
			}
		}
		for i := len(live); i < len(e.conns); i++ {
			e.conns[i] = nil
		}
		e.conns = live
		for _, cc := range e.conns {
			if cc.ReserveNewRequest() {
				e.mu.Unlock()
				return cc, nil
			}
		}
		if len(e.conns) >= maxConnsPerKey {
			// Queue on the first connection: RoundTrip waits for a slot.
			cc := e.conns[0]
			e.mu.Unlock()
			return cc, nil
		}
		if d := e.dialing; d != nil {
			e.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				return nil, &httpcore.DialError{Err: ctx.Err()}
			}
			if d.err != nil {
				return nil, d.err
			}
			continue
		}
		d := &dialResult{done: make(chan struct{})}
		e.dialing = d
		e.mu.Unlock()

		d.cc, d.err = cp.dial(ctx, key, dl)
		e.mu.Lock()
		e.dialing = nil
		if d.err == nil {
			e.conns = append(e.conns, d.cc)
		}
		e.mu.Unlock()
		close(d.done)
		if d.err != nil {
			return nil, d.err
		}
	}
}

func (cp *H2Pool) dial(ctx context.Context, key Key, dl Labels) (*h2client.Conn, error) {
	var conn net.Conn
	var err error
	if key.Identity != "" {
		conn, err = cp.d.Peer(ctx, key.peer(), transport.HTTP2)
	} else {
		conn, err = cp.d.Plain(ctx, key.Addr.String())
	}
	if err != nil {
		return nil, &httpcore.DialError{Err: fmt.Errorf("dataplane: connecting to %s: %w", key.Addr, err)}
	}
	conn = cp.d.Count(conn, dl)
	cc, err := h2client.New(ctx, conn, cp.opts...)
	if err != nil {
		conn.Close()
		return nil, &httpcore.DialError{Err: fmt.Errorf("dataplane: HTTP/2 with %s: %w", key.Addr, err)}
	}
	return cc, nil
}

// RoundTrip sends req on a pooled connection to key. A request the
// upstream refused without processing (GOAWAY race, refused stream) is
// sent once more, on whichever connection Get gives then, when again
// gives it a body to send (ok; nil for a request without one); never a
// third time, and never when again is nil or says no. The body sent
// first is never sent again: the HTTP/2 client may have read part of it
// before the refusal, and closes it on failure, so a second try needs a
// reader of the whole body from its start.
func (cp *H2Pool) RoundTrip(key Key, req *http.Request, again func() (body io.ReadCloser, ok bool), dl Labels) (*http.Response, error) {
	for try := 0; ; try++ {
		cc, err := cp.Get(req.Context(), key, dl)
		if err != nil {
			return nil, err
		}
		resp, err := cc.RoundTrip(req)
		if err != nil && try == 0 && unprocessed(err) && again != nil {
			if body, ok := again(); ok {
				req.Body = body
				continue
			}
		}
		return resp, err
	}
}

// RoundTripFields sends a frame-path request (the gRPC calls the proxy
// forwards field by field, without an http.Request) on a pooled
// connection to key, once: as RoundTrip with a body that cannot be
// replayed.
func (cp *H2Pool) RoundTripFields(ctx context.Context, key Key, req *h2client.FieldRequest, dl Labels) (*h2client.FieldResponse, error) {
	cc, err := cp.Get(ctx, key, dl)
	if err != nil {
		return nil, err
	}
	return cc.RoundTripFields(ctx, req)
}

// unprocessed reports whether an HTTP/2 error means the server never
// processed the request: the connection was closing or lost before it was
// sent, a GOAWAY named a lower last stream, or the stream was refused.
func unprocessed(err error) bool {
	return errors.Is(err, h2client.ErrUnprocessed)
}

// Sweep forgets upstreams without live connections (and no dial on its
// way); the proxy calls it periodically, so that the map holds only
// upstreams in use.
func (cp *H2Pool) Sweep() {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for k, e := range cp.m {
		e.mu.Lock()
		idle := e.dialing == nil
		for _, cc := range e.conns {
			if !cc.State().Closed {
				idle = false
			}
		}
		e.mu.Unlock()
		if idle {
			delete(cp.m, k)
		}
	}
}

// CloseAll closes every connection and refuses new ones (Get returns an
// *httpcore.DialError from then on).
func (cp *H2Pool) CloseAll() {
	cp.mu.Lock()
	cp.closed = true
	m := cp.m
	cp.m = map[Key]*poolEntry{}
	cp.mu.Unlock()
	for _, e := range m {
		e.mu.Lock()
		for _, cc := range e.conns {
			cc.Close()
		}
		e.mu.Unlock()
	}
}
