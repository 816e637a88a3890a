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
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// outboundUpgrade forwards a protocol upgrade (WebSocket): the request
// goes on a connection of its own (mesh TLS with the transport header
// announcing HTTP/1 for a meshed endpoint), and the connection becomes a
// tunnel only if the upstream answers 101 Switching Protocols for the
// protocol asked for. Any other answer is relayed as a normal response.
func (p *Proxy) outboundUpgrade(ctx context.Context, w http.ResponseWriter, r *http.Request, svc *service, rt *route.Route, up string, stats *reqStats) {
	router := svc.router.Load()
	fail := func(e *proxyErr) {
		p.m.http.errors.WithLabelValues(Outbound, svc.label, e.class).Inc()
		writeProxyError(w, false, e, false)
		if stats.ep == nil {
			stats.attempt(svc.localSeries())
		}
		stats.head(e.status)
		stats.done(e.status, "", true, e.class)
	}
	bi := route.PickBackend(rt.Backends, rt.FirstAvailable, func(i int) bool {
		b, err := svc.backend(ctx, rt.Backends[i], router.Accrual)
		return err == nil && b.usable()
	})
	if bi < 0 {
		fail(&proxyErr{http.StatusInternalServerError, 0, "no-backends", "the route has no backends"})
		return
	}
	be, err := svc.backend(ctx, rt.Backends[bi], router.Accrual)
	if err != nil {
		fail(&proxyErr{http.StatusServiceUnavailable, 0, "resolve", err.Error()})
		return
	}
	be.refresh()
	h, err := be.bal.Pick()
	if err != nil {
		fail(&proxyErr{http.StatusServiceUnavailable, 0, "no-endpoints", "no endpoint available"})
		return
	}
	stats.attempt(be.seriesFor(svc, h))
	ep := h.Value()
	hdr := outboundHeader(r, rt.RequestHeaders, rt.Backends[bi].RequestHeaders)
	p.forwardUpgrade(ctx, w, r, hdr, up, func(ctx context.Context) (net.Conn, error) {
		if ep.Identity != "" {
			return p.dialEndpoint(ctx, ep, svc.target, transport.HTTP1, nil)
		}
		dctx, cancel := context.WithTimeout(ctx, p.cfg.ConnectTimeout)
		defer cancel()
		return p.dialTracked(dctx, ep.Addr.String())
	}, stats, h, ep.Identity != "")
}

// forwardUpgrade sends an upgrade request on a fresh connection and
// tunnels only after a 101 that switches to the protocol asked for.
func (p *Proxy) forwardUpgrade(ctx context.Context, w http.ResponseWriter, r *http.Request, hdr http.Header, up string, dial func(context.Context) (net.Conn, error), stats *reqStats, h *balance.Handle[Endpoint], meshed bool) {
	done := func(ok bool) {
		if h != nil {
			h.Done(ok)
		}
	}
	if r.ContentLength != 0 {
		writeProxyError(w, false, &proxyErr{http.StatusBadRequest, 0, "upgrade-with-body", "an upgrade request may not have a body"}, false)
		stats.head(http.StatusBadRequest)
		stats.done(http.StatusBadRequest, "", true, "upgrade-with-body")
		done(true)
		return
	}
	conn, err := dial(ctx)
	if err != nil {
		writeProxyError(w, false, &proxyErr{http.StatusBadGateway, 0, "connect", err.Error()}, false)
		stats.head(http.StatusBadGateway)
		stats.done(http.StatusBadGateway, "", true, "connect")
		done(false)
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := h1.WriteRequestHead(conn, r.Method, r.URL.RequestURI(), r.Host, hdr, "Connection: Upgrade", "Upgrade: "+up); err != nil {
		writeProxyError(w, false, &proxyErr{http.StatusBadGateway, 0, "upstream", err.Error()}, false)
		stats.head(http.StatusBadGateway)
		stats.done(http.StatusBadGateway, "", true, "upstream")
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
		writeProxyError(w, false, &proxyErr{http.StatusBadGateway, 0, "upstream", err.Error()}, false)
		stats.head(http.StatusBadGateway)
		stats.done(http.StatusBadGateway, "", true, "upstream")
		done(false)
		return
	}
	stats.head(resp.StatusCode)
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
			writeProxyError(w, false, &proxyErr{http.StatusBadGateway, 0, "bad-upgrade", "the upstream switched to a protocol that was not asked for"}, false)
			stats.done(http.StatusBadGateway, "", true, "bad-upgrade")
			done(false)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Connection", "close")
		_, _, cerr := copyResponse(w, resp, func(h http.Header) {
			cleanResponseHeader(h, meshed)
			h.Set("Connection", "close")
		}, nil)
		stats.done(resp.StatusCode, "", resp.StatusCode >= 500, "")
		done(resp.StatusCode < 500)
		if cerr != nil && errors.Is(cerr, errUpstreamBody) {
			abort()
		}
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeProxyError(w, false, &proxyErr{http.StatusInternalServerError, 0, "upgrade", "the connection cannot switch protocols"}, false)
		stats.done(http.StatusInternalServerError, "", true, "upgrade")
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
	stats.done(http.StatusSwitchingProtocols, "", false, "")
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
		buf := getBuf()
		_, err := io.CopyBuffer(dst, src, *buf)
		putBuf(buf)
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
func halfCloserOf(c net.Conn) halfCloser {
	for {
		if hc, ok := c.(halfCloser); ok {
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
