package l4

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/accesslog"
	"github.com/weftmesh/weft/mesh/dataplane/internal/connmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2server"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	inboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/inbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/meshstate"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	outboundhttp "github.com/weftmesh/weft/mesh/dataplane/internal/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/internal/upstream"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
)

// connInfo is what the proxy knows about the connection a request came
// on; handlers find it in the request context.
type connInfo struct {
	direction string

	// Outbound: the destination's outbound state (internal/meshstate),
	// which internal/outbound reads as its Service.
	svc *meshstate.Service

	// Inbound (internal/inbound), and in its httpcore.Conn what both
	// directions read (H2, Remote, TargetAddr).
	inboundhttp.Conn
}

type infoKey struct{}

func infoOf(ctx context.Context) *connInfo {
	i, _ := ctx.Value(infoKey{}).(*connInfo)
	return i
}

// httpRuntime holds the HTTP servers and clients a proxy shares between
// connections.
type httpRuntime struct {
	h1      *h1.Server
	h2      *h2server.Config
	handler http.Handler
	h2opts  []h2client.Option    // for the pool's HTTP/2 client connections
	appH1   *h1.Client           // HTTP/1 to the local application (inbound)
	extH1   *h1.Client           // HTTP/1 to unmeshed endpoints (outbound)
	pool    *upstream.H2Pool     // HTTP/2: peer proxies, h2c applications and endpoints
	peerH1  *upstream.PeerH1Pool // HTTP/1.1 over mesh TLS to peer proxies

	h1OverH2 bool // Config.HTTP1OverH2 (toEndpoint)

	// grpcStreams serves the gRPC calls of inbound HTTP/2 connections at
	// frame level (nil: all go to handler).
	grpcStreams *h2server.StreamHandler
	// grpcOutStreams serves the gRPC calls of the application's HTTP/2
	// connections (outbound) at frame level (nil: all go to handler).
	grpcOutStreams *h2server.StreamHandler
}

func newHTTPRuntime(p *Paths) (*httpRuntime, error) {
	cfg := p.cfg
	rt := &httpRuntime{}
	handler := http.HandlerFunc(p.serveRequest)
	rt.h1 = &h1.Server{
		Handler:       handler,
		Limits:        h1.Limits{MaxHeaderBytes: cfg.HTTPMaxHeaderBytes},
		IdleTimeout:   cfg.HTTPIdleTimeout,
		HeaderTimeout: cfg.HTTPHeaderTimeout,
		OnRefused: func(ctx context.Context, err error) {
			dir := ""
			if i := infoOf(ctx); i != nil {
				dir = i.direction
			}
			p.m.HTTP.Protocol.WithLabelValues(dir, "http1-"+strconv.Itoa(h1.StatusOf(err))).Inc()
			p.log.Debug("HTTP/1 request refused", "direction", dir, "err", err)
		},
	}
	// HTTP/2 server limits, all set explicitly: streams per connection,
	// header list size (HPACK tables are 4096 bytes), receive windows,
	// frame size (16 KiB), idle time, keepalive, the reset budget and
	// the write timeout. The server (internal/h2server, the proxy's own,
	// for applications and peer proxies alike) also bounds running
	// handlers, queued output and control, empty and CONTINUATION floods
	// per connection; OnAbuse counts and logs the connections it ends.
	rt.handler = handler
	rt.h2 = &h2server.Config{
		MaxConcurrentStreams: cfg.H2MaxConcurrentStreams,
		MaxHeaderBytes:       cfg.HTTPMaxHeaderBytes,
		StreamWindow:         cfg.H2StreamWindow,
		ConnectionWindow:     cfg.H2ConnectionWindow,
		IdleTimeout:          cfg.HTTPIdleTimeout,
		PingInterval:         30 * time.Second,
		PingTimeout:          15 * time.Second,
		ResetBudget:          cfg.H2ResetBudget,
		WriteTimeout:         cfg.H2WriteTimeout,
		BufferLimit:          h2BufferLimit(cfg),
		CountError: func(errType string) {
			p.m.HTTP.Protocol.WithLabelValues("", "http2-"+h2ErrorClass(errType)).Inc()
		},
		Logger: p.log,
	}

	// Clients. Every multiplexed connection (to peer proxies over mesh
	// TLS, and h2c to applications and unmeshed endpoints) is an
	// h2client.Conn with these settings.
	// The connection window is given back as response bytes arrive, so
	// a response nobody reads holds only its stream window and never
	// starves the others on a shared connection. That window starts at
	// the initial stream window and grows only as the response is read,
	// so a download abandoned by its client pulls little through each
	// proxy it crosses (issue 27). What one connection
	// holds unread is bounded by twice its window (8 MiB by default),
	// past which the response read least recently loses its bytes (see
	// h2client's package doc).
	rt.h2opts = []h2client.Option{
		h2client.WithWindows(cfg.H2StreamWindow, cfg.H2ConnectionWindow),
		h2client.WithInitialStreamWindow(h2InitialStreamWindow(cfg)),
		h2client.WithBufferLimit(h2BufferLimit(cfg)),
		h2client.WithMaxHeaderBytes(cfg.HTTPMaxHeaderBytes),
		h2client.WithKeepalive(30*time.Second, 15*time.Second),
		h2client.WithIdleTimeout(90 * time.Second),
		h2client.WithCountError(func(class string) {
			p.m.HTTP.Protocol.WithLabelValues("client", "http2-"+h2ErrorClass(class)).Inc()
		}),
	}

	// HTTP/1 to the application and to unmeshed endpoints: two clients,
	// so that each connection is counted with the right transport labels.
	// The connect timeout is the direction's (dialWithin).
	newH1 := func(l func(addr string) *metricstore.Labels) *h1.Client {
		return &h1.Client{
			Dial: func(ctx context.Context, addr string) (net.Conn, error) {
				c, err := p.dialWithin(ctx, addr)
				if err != nil {
					return nil, err
				}
				return p.m.Dial(c, l(addr)), nil
			},
			Reusable:       upstream.PlainConnReusable,
			MaxIdlePerAddr: 256,
			IdleTimeout:    90 * time.Second,
			Limits:         h1.Limits{MaxHeaderBytes: cfg.HTTPMaxHeaderBytes},
			OmitTrailer:    httpcore.IsMeshHeader, // never forwarded as trailers
		}
	}
	rt.appH1 = newH1(func(string) *metricstore.Labels { return connmetrics.App() })
	rt.extH1 = newH1(func(addr string) *metricstore.Labels {
		ap, _ := netip.ParseAddrPort(addr)
		return connmetrics.OutboundDst("", endpoint.Endpoint{Addr: ap})
	})
	// The pools to upstreams (internal/upstream) dial with the proxy's
	// mesh TLS and connect timeout, and count their connections in its
	// transport metrics.
	dialer := upstream.Dialer{
		Peer: func(ctx context.Context, ep endpoint.Endpoint, proto transport.Protocol) (net.Conn, error) {
			return p.dialEndpoint(ctx, ep, "", proto, nil)
		},
		Plain: p.dialWithin,
		Count: func(c net.Conn, l upstream.Labels) net.Conn { return p.m.Dial(c, dialLabels(l)) },
	}
	settings := upstream.Settings{
		H2:             rt.h2opts,
		IdleTimeout:    cfg.HTTPIdleTimeout,
		WaitTimeout:    cfg.HTTPPoolWaitTimeout,
		MaxHeaderBytes: cfg.HTTPMaxHeaderBytes,
	}
	rt.pool = upstream.NewH2(dialer, settings)
	rt.peerH1 = upstream.NewPeerH1(dialer, settings)
	rt.h1OverH2 = cfg.HTTP1OverH2
	return rt, nil
}

// dialLabels are the transport labels of a pooled connection: to the
// local application, or to an endpoint.
func dialLabels(l upstream.Labels) *metricstore.Labels {
	if l.Inbound {
		return connmetrics.App()
	}
	return connmetrics.OutboundDst("", l.Endpoint)
}

// toEndpoint sends a request of the outbound HTTP side to one endpoint
// (its HTTP.RoundTrip). To a meshed endpoint (its proxy, over mutual
// TLS): an HTTP/1 request over a pooled HTTP/1.1 connection, or with
// HTTP1OverH2 over the pooled HTTP/2 connection carrying its version in
// l5d-orig-proto; an HTTP/2 request over the pooled HTTP/2 connection. To
// an unmeshed one: h2c when the client spoke HTTP/2, HTTP/1 otherwise.
//
// from is the downstream client the request came from (its connection's
// source address), whose share of the HTTP/1.1 pool it uses; body is the
// request's kept body, which says whether the HTTP/2 pool may send it
// again. A wait past the HTTP/1.1 pool's deadline becomes the outbound
// side's PoolTimeoutError (503 "pool-timeout", no other endpoint tried).
func (rt *httpRuntime) toEndpoint(req *http.Request, ep endpoint.Endpoint, clientH2 bool, from netip.Addr, body *outboundhttp.ReplayBody) (*http.Response, error) {
	if ep.Identity != "" {
		dial := ep.Addr
		if ep.OpaqueTransportPort != 0 {
			dial = netip.AddrPortFrom(ep.Addr.Addr(), ep.OpaqueTransportPort)
		}
		key := upstream.Key{Addr: dial, Identity: ep.Identity, Port: ep.Addr.Port()}
		if !clientH2 && !rt.h1OverH2 {
			resp, err := rt.peerH1.RoundTrip(key, req, from, upstream.Labels{Endpoint: ep})
			if pe, ok := err.(*h1.PoolTimeoutError); ok {
				return nil, &outboundhttp.PoolTimeoutError{Err: pe}
			}
			return resp, err
		}
		if !clientH2 {
			req.Header[httpcore.HeaderOrigProto] = []string{"HTTP/1.1"}
		}
		return rt.pool.RoundTrip(key, req, sendAgain(req, body), upstream.Labels{Endpoint: ep})
	}
	if clientH2 {
		return rt.pool.RoundTrip(upstream.Key{Addr: ep.Addr}, req, sendAgain(req, body), upstream.Labels{Endpoint: ep})
	}
	resp, err := rt.extH1.RoundTrip(req, ep.Addr.String())
	var de *h1.DialError
	if errors.As(err, &de) {
		return nil, &httpcore.DialError{Err: err}
	}
	return resp, err
}

// sendAgain is what the HTTP/2 pool sends when an upstream refused req
// unprocessed and it tries once more: the kept body read from its start
// while it can be (body.Again), nothing for a request without a body,
// and no second try for a body that was not kept.
func sendAgain(req *http.Request, body *outboundhttp.ReplayBody) func() (io.ReadCloser, bool) {
	return func() (io.ReadCloser, bool) {
		switch {
		case body != nil:
			if !body.Replayable() {
				return nil, false
			}
			return body.Again(), true
		case req.Body == nil || req.Body == http.NoBody:
			return req.Body, true
		default:
			return nil, false
		}
	}
}

// h2BufferLimit is what one HTTP/2 connection, served or pooled, may
// hold of bodies not read yet: WEFT_PROXY_HTTP2_BUFFER_LIMIT, or twice
// its receive window.
func h2BufferLimit(cfg Config) int64 {
	if cfg.H2BufferLimit > 0 {
		return cfg.H2BufferLimit
	}
	return 2 * int64(cfg.H2ConnectionWindow)
}

// h2InitialStreamWindow is where the window of a response stream on the
// proxy's HTTP/2 client connections starts (h2client grows it to the
// stream window as the response is read): WEFT_PROXY_HTTP2_INITIAL_STREAM_WINDOW,
// 256 KiB by default, never more than the stream window.
func h2InitialStreamWindow(cfg Config) int32 {
	w := cfg.H2InitialStreamWindow
	if w == 0 {
		w = 256 << 10
	}
	return min(w, cfg.H2StreamWindow)
}

// h2ErrorClass folds Go's HTTP/2 error names into a bounded label value.
func h2ErrorClass(errType string) string {
	if len(errType) > 40 {
		errType = errType[:40]
	}
	for i := 0; i < len(errType); i++ {
		c := errType[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "other"
		}
	}
	return errType
}

// serveHTTP serves HTTP on a connection whose protocol was detected (or
// announced by the transport header), on a fresh goroutine so that the
// stack grown during detection is released. l are the connection's
// transport labels (peer="src"). done runs when it ends.
func (p *Paths) serveHTTP(conn net.Conn, proto transport.Protocol, info *connInfo, l *metricstore.Labels, done func()) {
	ctx := context.WithValue(p.runCtx, infoKey{}, info)
	stats := p.m.Opened(l)
	conn = &connmetrics.Counted{Conn: conn, ReadBytes: stats.ReadBytes, WrittenBytes: stats.WrittenBytes}
	go func() {
		defer done()
		defer stats.Closed()
		if proto == transport.HTTP2 {
			info.H2 = true
			// The connection's own copy of the settings carries the
			// connection's direction to the abuse report.
			h2cfg := *p.http.h2
			if info.direction == Inbound {
				h2cfg.Streams = p.http.grpcStreams
			} else {
				h2cfg.Streams = p.http.grpcOutStreams
			}
			h2cfg.OnAbuse = func(reason string) {
				p.m.HTTP.Protocol.WithLabelValues(info.direction, reason).Inc()
				p.log.Info("HTTP/2 connection closed for abuse", "direction", info.direction, "client", conn.RemoteAddr().String(), "reason", reason)
			}
			// The proxy's run context ending is the drain: GOAWAY, streams
			// in flight finish.
			h2server.ServeConn(ctx, conn, p.http.handler, &h2cfg)
			conn.Close()
			return
		}
		p.http.h1.ServeConn(ctx, conn)
	}()
}

// grpcStreams is the frame path of inbound gRPC calls (ServeFrames), for
// the requests inbound.AcceptGRPC takes; before is a test hook (nil).
func (p *Paths) grpcStreams(before func()) *h2server.StreamHandler {
	return &h2server.StreamHandler{
		Accept: inboundhttp.AcceptGRPC,
		Serve: func(st *h2server.Stream) {
			if before != nil {
				before()
			}
			p.in.ServeFrames(st, &infoOf(st.Context()).Conn)
		},
	}
}

// serveRequest dispatches a request by the direction of its connection.
func (p *Paths) serveRequest(w http.ResponseWriter, r *http.Request) {
	info := infoOf(r.Context())
	if info == nil {
		http.Error(w, "no connection context", http.StatusInternalServerError)
		return
	}
	if p.tracer != nil {
		p.serveTraced(w, r, info)
		return
	}
	p.dispatch(w, r, info)
}

// dispatch serves a request by the direction of its connection.
func (p *Paths) dispatch(w http.ResponseWriter, r *http.Request, info *connInfo) {
	if info.direction == Inbound {
		if p.access != nil {
			p.serveInboundLogged(w, r, info)
			return
		}
		p.in.Serve(w, r, &info.Conn)
		return
	}
	p.out.Serve(w, r, &info.Conn.Conn, info.svc)
}

// serveInboundLogged serves an inbound request through inbound.HTTP.Serve
// and writes its access-log line (internal/accesslog) when the exchange
// ends, even if the handler aborts the response.
func (p *Paths) serveInboundLogged(w http.ResponseWriter, r *http.Request, info *connInfo) {
	rec := p.access.Start(r, accesslog.Client{Identity: info.Peer.Identity, IP: info.Peer.IP, FromProxy: info.FromProxy})
	defer rec.Finish()
	p.in.Serve(rec.Writer(w), r, &info.Conn)
}
