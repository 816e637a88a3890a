package httpcore

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/net/http2"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
)

// Why a protocol upgrade got no tunnel, in either direction; UpgradeAnswer
// turns each into what the client gets.
var (
	ErrUpgradeBody = errors.New("dataplane: an upgrade request may not have a body")
	ErrBadUpgrade  = errors.New("dataplane: the upstream switched to a protocol that was not asked for")
	ErrNoHijack    = errors.New("dataplane: the connection cannot switch protocols")
)

// UpgradeError is a protocol upgrade's own exchange failing: dialling its
// connection (Dial) or writing the request and reading the answer.
type UpgradeError struct {
	Err  error
	Dial bool
}

func (e *UpgradeError) Error() string { return e.Err.Error() }
func (e *UpgradeError) Unwrap() error { return e.Err }

// UpgradeAnswer maps the causes ForwardUpgrade fails with to the proxy's
// answer, the same both ways (an upgrade is not retried on another
// endpoint: failing to dial its connection is the upstream's failure,
// 502). ok is false for any other error.
func UpgradeAnswer(err error) (a Answer, ok bool) {
	var up *UpgradeError
	switch {
	case errors.Is(err, ErrUpgradeBody):
		return Answer{Status: http.StatusBadRequest, GRPC: GRPCUnavailable, Class: "upgrade-with-body", Msg: "an upgrade request may not have a body"}, true
	case errors.Is(err, ErrBadUpgrade):
		return Answer{Status: http.StatusBadGateway, GRPC: GRPCUnavailable, Class: "bad-upgrade", Msg: "the upstream switched to a protocol that was not asked for"}, true
	case errors.Is(err, ErrNoHijack):
		return Answer{Status: http.StatusInternalServerError, GRPC: GRPCUnavailable, Class: "upgrade", Msg: "the connection cannot switch protocols"}, true
	case errors.As(err, &up) && up.Dial:
		return Answer{Status: http.StatusBadGateway, GRPC: GRPCUnavailable, Class: "connect", Msg: up.Err.Error()}, true
	case up != nil:
		return Answer{Status: http.StatusBadGateway, GRPC: GRPCUnavailable, Class: "upstream", Msg: up.Err.Error()}, true
	}
	return Answer{}, false
}

// Upgrade is one protocol upgrade (WebSocket) to forward: the protocol
// the client asked for, the request header as it goes upstream, how its
// connection is dialled, and what the caller records.
type Upgrade struct {
	Proto  string      // the Upgrade header's value
	Header http.Header // the request header as sent upstream (hop-by-hop fields removed)
	Dial   func(context.Context) (net.Conn, error)

	// Fail answers the request for the proxy (the caller's answer
	// function: UpgradeAnswer's causes) and records the answer.
	Fail func(error)
	// Head records the upstream's response head; Done the end of the
	// exchange (for a switch, when the tunnel starts).
	Head func(status int)
	Done func(status int, failure bool)
	// Endpoint, when set, learns whether the endpoint served well (a
	// balancer's handle).
	Endpoint func(ok bool)
	// FromPeerProxy keeps the headers a peer proxy explains its own
	// answers with (CleanResponseHeader).
	FromPeerProxy bool
}

// ForwardUpgrade sends an upgrade request on a fresh connection and
// tunnels only after a 101 that switches to the protocol asked for; any
// other answer is relayed as a normal response and the connection closed.
// It returns when the tunnel ends.
func ForwardUpgrade(ctx context.Context, w http.ResponseWriter, r *http.Request, u *Upgrade) {
	done := func(ok bool) {
		if u.Endpoint != nil {
			u.Endpoint(ok)
		}
	}
	if r.ContentLength != 0 {
		u.Fail(ErrUpgradeBody)
		done(true)
		return
	}
	conn, err := u.Dial(ctx)
	if err != nil {
		u.Fail(&UpgradeError{Err: err, Dial: true})
		done(false)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := h1.WriteRequestHead(conn, r.Method, r.URL.RequestURI(), r.Host, u.Header, "Connection: Upgrade", "Upgrade: "+u.Proto); err != nil {
		u.Fail(&UpgradeError{Err: err})
		done(false)
		return
	}
	br := bufio.NewReader(conn)
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.ReadResponse(br, r)
		if err != nil || resp.StatusCode == http.StatusSwitchingProtocols || resp.StatusCode >= 200 || i >= 5 {
			break
		}
	}
	if err != nil {
		u.Fail(&UpgradeError{Err: err})
		done(false)
		return
	}
	u.Head(resp.StatusCode)
	switched := resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(strings.TrimSpace(resp.Header.Get("Upgrade")), strings.TrimSpace(u.Proto))
	hasUpgradeToken := false
	for _, t := range h1.ConnectionTokens(resp.Header) {
		hasUpgradeToken = hasUpgradeToken || t == "upgrade"
	}
	if !switched || !hasUpgradeToken {
		// No protocol switch: relay the answer as a normal response and
		// never tunnel (an upstream 200 to an Upgrade is not a switch).
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			u.Fail(ErrBadUpgrade)
			done(false)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Connection", "close")
		_, _, cerr := CopyResponse(w, resp, func(h http.Header) {
			CleanResponseHeader(h, u.FromPeerProxy)
			h.Set("Connection", "close")
		}, nil)
		u.Done(resp.StatusCode, resp.StatusCode >= 500)
		done(resp.StatusCode < 500)
		if cerr != nil && errors.Is(cerr, ErrUpstreamBody) {
			Abort()
		}
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		u.Fail(ErrNoHijack)
		done(true)
		return
	}
	client, crw, err := hj.Hijack()
	if err != nil {
		done(true)
		return
	}
	defer client.Close()
	rh := resp.Header.Clone()
	h1.RemoveHopByHop(rh)
	CleanResponseHeader(rh, u.FromPeerProxy)
	if err := h1.WriteResponseHead(crw, http.StatusSwitchingProtocols, rh, "Connection: Upgrade", "Upgrade: "+u.Proto); err != nil {
		done(true)
		return
	}
	if err := crw.Flush(); err != nil {
		done(true)
		return
	}
	u.Done(http.StatusSwitchingProtocols, false)
	done(true)
	tunnel(&bufferedConn{Conn: client, r: crw.Reader}, &bufferedConn{Conn: conn, r: br})
}

// CleanResponseHeader removes mesh headers from a response; from a peer
// proxy the two that explain its own answers are kept.
func CleanResponseHeader(h http.Header, fromPeerProxy bool) {
	var perr, deny []string
	if fromPeerProxy {
		perr, deny = h[HeaderProxyError], h[HeaderDenyReason]
	}
	RemoveMeshHeaders(h)
	if len(perr) > 0 {
		h[HeaderProxyError] = perr
	}
	if len(deny) > 0 {
		h[HeaderDenyReason] = deny
	}
}

// bufferedConn reads what a bufio.Reader already holds before the
// connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// NetConn returns the connection bufferedConn wraps.
func (b *bufferedConn) NetConn() net.Conn { return b.Conn }

// tunnel copies both ways until both directions ended.
func tunnel(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		buf := relay.GetBuf()
		_, err := io.CopyBuffer(dst, src, *buf)
		relay.PutBuf(buf)
		if err == nil {
			if hc := halfCloserOf(dst); hc != nil && hc.CloseWrite() == nil {
				return
			}
		}
		dst.Close()
		src.Close()
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// halfCloserOf finds, through the proxy's connection wrappers (each has a
// NetConn method returning what it wraps), the connection whose write
// side can be shut (a TLS connection itself, so that it sends
// close_notify).
func halfCloserOf(c net.Conn) relay.HalfCloser {
	for {
		if hc, ok := c.(relay.HalfCloser); ok {
			return hc
		}
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = nc.NetConn()
	}
}

// StreamErrorClass names why a response stream did not complete, for the
// error label.
func StreamErrorClass(err error) string {
	switch {
	case errors.Is(err, ErrClientGone):
		return "client-gone"
	case errors.Is(err, ErrUpstreamBody):
		return "upstream-reset"
	}
	return "error"
}

// RequestBodyError is an exchange that failed because the client's body
// did (malformed framing, or the client went away in the middle of it);
// BodyFailure answers it.
type RequestBodyError struct{ Err error }

func (e *RequestBodyError) Error() string { return "dataplane: request body: " + e.Err.Error() }
func (e *RequestBodyError) Unwrap() error { return e.Err }

// StreamResetCode is the HTTP/2 error code of a stream reset that ended a
// response body (for a tap's event), -1 when the error is not one.
func StreamResetCode(err error) int64 {
	var se http2.StreamError
	if errors.As(err, &se) {
		return int64(se.Code)
	}
	switch {
	case errors.Is(err, ErrClientGone):
		return int64(http2.ErrCodeCancel)
	case errors.Is(err, ErrUpstreamBody):
		return int64(http2.ErrCodeInternal)
	}
	return -1
}
