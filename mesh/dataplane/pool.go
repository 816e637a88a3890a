package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// poolKey names a multiplexed upstream: a peer proxy reached with mesh TLS
// (identity set, the transport header naming port), or a plaintext h2c
// server (identity empty).
type poolKey struct {
	addr     netip.AddrPort // where to dial
	identity string
	port     uint16 // application port announced in the transport header
}

// connPool keeps HTTP/2 client connections per upstream and shares them
// between requests. A new connection is dialled only when every existing
// one is at its stream limit (one dial at a time per upstream; requests
// that arrive meanwhile wait for it), up to maxConnsPerKey.
type connPool struct {
	p      *Proxy
	mu     sync.Mutex
	m      map[poolKey]*poolEntry
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

func newConnPool(p *Proxy) *connPool { return &connPool{p: p, m: map[poolKey]*poolEntry{}} }

// dialLabels says how a pooled connection is labelled in the transport
// metrics when it is dialled: to the local application, or to an
// endpoint. It is passed by value so that requests that reuse a
// connection build nothing.
type dialLabels struct {
	inbound bool
	ep      Endpoint
}

func (d dialLabels) labels() *metricstore.Labels {
	if d.inbound {
		return appLabels()
	}
	return outboundDstLabels("", d.ep)
}

// get returns a connection with a stream reserved for one request.
func (cp *connPool) get(ctx context.Context, key poolKey, dl dialLabels) (*h2client.Conn, error) {
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

func (cp *connPool) dial(ctx context.Context, key poolKey, dl dialLabels) (*h2client.Conn, error) {
	p := cp.p
	var conn net.Conn
	var err error
	if key.identity != "" {
		conn, err = p.dialEndpoint(ctx, Endpoint{Addr: netip.AddrPortFrom(key.addr.Addr(), key.port), Identity: key.identity, OpaqueTransportPort: key.addr.Port()}, "", transport.HTTP2, nil)
	} else {
		conn, err = p.dialWithin(ctx, key.addr.String())
	}
	if err != nil {
		return nil, &httpcore.DialError{Err: fmt.Errorf("dataplane: connecting to %s: %w", key.addr, err)}
	}
	conn = p.countedDial(conn, dl.labels())
	cc, err := h2client.New(ctx, conn, p.http.h2opts...)
	if err != nil {
		conn.Close()
		return nil, &httpcore.DialError{Err: fmt.Errorf("dataplane: HTTP/2 with %s: %w", key.addr, err)}
	}
	return cc, nil
}

// roundTrip sends req on a pooled connection to key. A request the
// upstream refused without processing (GOAWAY race, refused stream) is
// sent once more on another connection when its body can be replayed.
func (cp *connPool) roundTrip(key poolKey, req *http.Request, replayable func() bool, dl dialLabels) (*http.Response, error) {
	for try := 0; ; try++ {
		cc, err := cp.get(req.Context(), key, dl)
		if err != nil {
			return nil, err
		}
		resp, err := cc.RoundTrip(req)
		if err != nil && try == 0 && unprocessed(err) && replayable() {
			continue
		}
		return resp, err
	}
}

// roundTripFields sends a frame-path request (inbound ServeFrames) on a
// pooled connection to key, once: as roundTrip with a body that cannot
// be replayed.
func (cp *connPool) roundTripFields(ctx context.Context, key poolKey, req *inboundhttp.FieldRequest, dl dialLabels) (inboundhttp.FieldResponse, error) {
	cc, err := cp.get(ctx, key, dl)
	if err != nil {
		return inboundhttp.FieldResponse{}, err
	}
	resp, err := cc.RoundTripFields(ctx, &h2client.FieldRequest{Method: req.Method, Scheme: "http",
		Authority: req.Authority, Path: req.Path, Fields: req.Fields, Body: req.Body})
	if err != nil {
		return inboundhttp.FieldResponse{}, err
	}
	return inboundhttp.FieldResponse{Status: resp.Status, Fields: resp.Fields, Body: resp.Body, Trailers: resp}, nil
}

// unprocessed reports whether an HTTP/2 error means the server never
// processed the request: the connection was closing or lost before it was
// sent, a GOAWAY named a lower last stream, or the stream was refused.
func unprocessed(err error) bool {
	return errors.Is(err, h2client.ErrUnprocessed)
}

// sweep forgets upstreams without live connections.
func (cp *connPool) sweep() {
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

// closeAll closes every connection and refuses new ones.
func (cp *connPool) closeAll() {
	cp.mu.Lock()
	cp.closed = true
	m := cp.m
	cp.m = map[poolKey]*poolEntry{}
	cp.mu.Unlock()
	for _, e := range m {
		e.mu.Lock()
		for _, cc := range e.conns {
			cc.Close()
		}
		e.mu.Unlock()
	}
}
