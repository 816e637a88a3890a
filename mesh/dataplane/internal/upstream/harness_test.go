package upstream_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/internal/testutil"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// peerIdentity is the name the test peer's certificate carries, standing
// for a peer proxy's mesh identity.
const peerIdentity = "web.default.serviceaccount.identity.weft.cluster.local"

// h1Peer is a real HTTP/1.1 server (net/http) behind TLS with a
// certificate made at run time, standing for a peer proxy's inbound
// side. /hold waits for a token on release (or for release to close)
// before it answers; any other path answers "ok" at once. Every request
// announces its path on arrived when it reaches the handler.
type h1Peer struct {
	addr    netip.AddrPort
	client  *tls.Config // verifies the peer as peerIdentity
	arrived chan string
	release chan struct{}
	closed  chan struct{} // one token per connection the server closed
}

func startH1Peer(t *testing.T) *h1Peer {
	t.Helper()
	ca := testutil.NewAnchor(t, testutil.CertOptions{})
	leaf := ca.Leaf(t, testutil.CertOptions{Name: peerIdentity})
	p := &h1Peer{
		client:  &tls.Config{RootCAs: testutil.Pool(ca), MinVersion: tls.VersionTLS13},
		arrived: make(chan string, 256),
		release: make(chan struct{}),
		closed:  make(chan struct{}, 256),
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.arrived <- r.URL.Path
			if r.URL.Path == "/hold" {
				select {
				case <-p.release:
				case <-r.Context().Done():
					return
				}
			}
			io.WriteString(w, "ok")
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf.TLS}, MinVersion: tls.VersionTLS13},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				p.closed <- struct{}{}
			}
		},
	}
	l := testutil.Listen(t)
	p.addr = l.Addr().(*net.TCPAddr).AddrPort()
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.ServeTLS(l, "", "")
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return p
}

// key is the pools' key for the peer: its address, its identity, and an
// application port (8080) the transport header would announce.
func (p *h1Peer) key() upstream.Key {
	return upstream.Key{Addr: p.addr, Identity: peerIdentity, Port: 8080}
}

// dials is a Dialer over loopback that records what the pools ask of it:
// Peer dials mesh-style TLS to the endpoint's proxy port (the address
// the key names) verifying its identity, Plain dials plain TCP, and
// Count wraps each connection (with NetConn, as the proxy's wrapper
// does) and records its labels and its close.
type dials struct {
	tls    *tls.Config // nil: Peer refuses (no TLS peer in the test)
	mu     sync.Mutex
	peers  []peerDial
	labels []upstream.Labels
	closed atomic.Int32
}

// peerDial is one call of Dialer.Peer.
type peerDial struct {
	ep    endpoint.Endpoint
	proto transport.Protocol
}

func (d *dials) dialer() upstream.Dialer {
	return upstream.Dialer{
		Peer: func(ctx context.Context, ep endpoint.Endpoint, proto transport.Protocol) (net.Conn, error) {
			d.mu.Lock()
			d.peers = append(d.peers, peerDial{ep: ep, proto: proto})
			d.mu.Unlock()
			if d.tls == nil {
				return nil, errors.New("test: no TLS peer")
			}
			cfg := d.tls.Clone()
			cfg.ServerName = ep.Identity
			td := &tls.Dialer{Config: cfg}
			return td.DialContext(ctx, "tcp", netip.AddrPortFrom(ep.Addr.Addr(), ep.OpaqueTransportPort).String())
		},
		Plain: func(ctx context.Context, addr string) (net.Conn, error) {
			var nd net.Dialer
			return nd.DialContext(ctx, "tcp", addr)
		},
		Count: func(c net.Conn, l upstream.Labels) net.Conn {
			d.mu.Lock()
			d.labels = append(d.labels, l)
			d.mu.Unlock()
			return &countedConn{Conn: c, d: d}
		},
	}
}

// counted returns the labels of every connection counted so far.
func (d *dials) counted() []upstream.Labels {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]upstream.Labels(nil), d.labels...)
}

func (d *dials) peerDials() []peerDial {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]peerDial(nil), d.peers...)
}

type countedConn struct {
	net.Conn
	d    *dials
	once sync.Once
}

func (c *countedConn) NetConn() net.Conn { return c.Conn }

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.d.closed.Add(1) })
	return err
}

// get is a GET of path bounded by the test's default timeout.
func get(t *testing.T, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 0), http.MethodGet, "http://web.default:8080"+path, nil)
	require.NoError(t, err)
	return req
}

// readOK reads a response to its end and checks it is the peers' "ok".
func readOK(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(b) != "ok" {
		return errors.New("test: unexpected answer " + resp.Status + " " + string(b))
	}
	return nil
}

// h2cPeer is a real HTTP/2 server (net/http's) over plaintext, standing for
// an application that speaks h2c. It answers "ok". closeConns closes
// every connection it accepted, as a server restarting would.
type h2cPeer struct {
	addr  netip.AddrPort
	mu    sync.Mutex
	conns []net.Conn
}

func startH2CPeer(t *testing.T) *h2cPeer {
	t.Helper()
	l := testutil.Listen(t)
	p := &h2cPeer{addr: l.Addr().(*net.TCPAddr).AddrPort()}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		Protocols: &protos,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				p.mu.Lock()
				p.conns = append(p.conns, c)
				p.mu.Unlock()
			}
		},
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	return p
}

func (p *h2cPeer) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// refusingPeer is an HTTP/2 server written with x/net's framer, because
// no ready server refuses a stream on demand: it refuses (RST_STREAM
// REFUSED_STREAM, the answer of a server that did not process the
// request) every stream for which refuse says so and answers the others
// 200 with no body. It records each request's path on paths, in the
// order the streams arrived.
type refusingPeer struct {
	addr   netip.AddrPort
	paths  chan string
	bodies chan string // the body of each request it answered, once whole
}

func startRefusingPeer(t *testing.T, refuse func(n int, path string) bool) *refusingPeer {
	t.Helper()
	l := testutil.Listen(t)
	p := &refusingPeer{addr: l.Addr().(*net.TCPAddr).AddrPort(), paths: make(chan string, 64), bodies: make(chan string, 64)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				p.serve(c, refuse)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *refusingPeer) serve(c net.Conn, refuse func(n int, path string) bool) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if fr.WriteSettings() != nil {
		return
	}
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	n := 0
	answer := func(id uint32) error {
		hbuf.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true, EndStream: true})
	}
	// Requests with a body are answered once it ended; refused streams'
	// DATA is dropped.
	bodies := map[uint32]*bytes.Buffer{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			b := bodies[f.StreamID]
			if b == nil {
				continue
			}
			b.Write(f.Data())
			if f.StreamEnded() {
				delete(bodies, f.StreamID)
				p.bodies <- b.String()
				if answer(f.StreamID) != nil {
					return
				}
			}
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
				return
			}
		case *http2.MetaHeadersFrame:
			n++
			path := f.PseudoValue("path")
			p.paths <- path
			id := f.Header().StreamID
			switch {
			case refuse(n, path):
				err = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
			case !f.StreamEnded():
				bodies[id] = &bytes.Buffer{}
			default:
				err = answer(id)
			}
			if err != nil {
				return
			}
		}
	}
}

func netipAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	require.NoError(t, err)
	return ap
}
