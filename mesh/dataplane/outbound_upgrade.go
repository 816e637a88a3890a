package dataplane

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/relay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// outboundUpgrade forwards a protocol upgrade (WebSocket): the request
// goes, in one attempt, to an endpoint picked as for any request, on a
// connection of its own (mesh TLS with the transport header announcing
// HTTP/1 for a meshed endpoint), and the connection becomes a tunnel only
// if the upstream answers 101 Switching Protocols for the protocol asked
// for. Any other answer is relayed as a normal response. Taps are not
// offered upgrades.
func (p *Proxy) outboundUpgrade(c *outboundCall, up string) {
	c.tapped = true
	var a outboundAttempt
	if err := a.pick(c, nil); err != nil {
		c.fail(err)
		return
	}
	ep := a.h.Value()
	hdr := outboundHeader(c.r, c.rt.RequestHeaders, a.backend.RequestHeaders)
	target := c.svc.target
	p.forwardUpgrade(c.ctx, c.w, c.r, hdr, up, func(ctx context.Context) (net.Conn, error) {
		if ep.Identity != "" {
			return p.dialEndpoint(ctx, ep, target, transport.HTTP1, nil)
		}
		dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
		defer cancel()
		return p.dialTracked(dctx, ep.Addr.String())
	}, c.fail, &c.stats, a.h, ep.Identity != "")
}

// forwardUpgrade sends an upgrade request on a fresh connection and
// tunnels only after a 101 that switches to the protocol asked for. fail
// answers for the proxy (outboundAnswer; inboundAnswer for the local
// application, which answers these causes the same way) and records the
// answer.
func (p *Proxy) forwardUpgrade(ctx context.Context, w http.ResponseWriter, r *http.Request, hdr http.Header, up string, dial func(context.Context) (net.Conn, error), fail func(error), stats *reqmetrics.Stats, h *balance.Handle[Endpoint], meshed bool) {
	done := func(ok bool) {
		if h != nil {
			h.Done(ok)
		}
	}
	if r.ContentLength != 0 {
		fail(errUpgradeBody)
		done(true)
		return
	}
	conn, err := dial(ctx)
	if err != nil {
		fail(&upgradeError{err: err, dial: true})
		done(false)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := h1.WriteRequestHead(conn, r.Method, r.URL.RequestURI(), r.Host, hdr, "Connection: Upgrade", "Upgrade: "+up); err != nil {
		fail(&upgradeError{err: err})
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
		fail(&upgradeError{err: err})
		done(false)
		return
	}
	stats.Head(resp.StatusCode)
	switched := resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(strings.TrimSpace(resp.Header.Get("Upgrade")), strings.TrimSpace(up))
	hasUpgradeToken := false
	for _, t := range h1.ConnectionTokens(resp.Header) {
		hasUpgradeToken = hasUpgradeToken || t == "upgrade"
	}
	if !switched || !hasUpgradeToken {
		// No protocol switch: relay the answer as a normal response and
		// never tunnel (an upstream 200 to an Upgrade is not a switch).
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			fail(errBadUpgrade)
			done(false)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Connection", "close")
		_, _, cerr := httpcore.CopyResponse(w, resp, func(h http.Header) {
			cleanResponseHeader(h, meshed)
			h.Set("Connection", "close")
		}, nil)
		stats.Done(resp.StatusCode, "", resp.StatusCode >= 500, "")
		done(resp.StatusCode < 500)
		if cerr != nil && errors.Is(cerr, httpcore.ErrUpstreamBody) {
			httpcore.Abort()
		}
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		fail(errNoHijack)
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
	cleanResponseHeader(rh, meshed)
	if err := h1.WriteResponseHead(crw, http.StatusSwitchingProtocols, rh, "Connection: Upgrade", "Upgrade: "+up); err != nil {
		done(true)
		return
	}
	if err := crw.Flush(); err != nil {
		done(true)
		return
	}
	stats.Done(http.StatusSwitchingProtocols, "", false, "")
	done(true)
	tunnel(&bufferedConn{Conn: client, r: crw.Reader}, &bufferedConn{Conn: conn, r: br})
}

// bufferedConn reads what a bufio.Reader already holds before the
// connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

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

// halfCloserOf finds, through the proxy's connection wrappers, the
// connection whose write side can be shut (a TLS connection itself, so
// that it sends close_notify).
func halfCloserOf(c net.Conn) relay.HalfCloser {
	for {
		if hc, ok := c.(relay.HalfCloser); ok {
			return hc
		}
		switch v := c.(type) {
		case *bufferedConn:
			c = v.Conn
		case *replayConn:
			c = v.Conn
		case *countedConn:
			c = v.Conn
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
}
