package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2client"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h2server"
	"github.com/weftmesh/weft/mesh/dataplane/internal/metricstore"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Mesh-internal headers. Each proxy removes every l5d-* and weft-* header
// it receives from anything but the peer proxy of the same hop, and sets
// its own.
const (
	// headerOrigProto carries the client's HTTP/1 version across the
	// HTTP/2 hop between proxies; the inbound proxy restores it. The
	// HTTP/1.1 hop needs and sends none.
	headerOrigProto = "L5d-Orig-Proto"
	// headerClientID tells the application the verified identity of the
	// client (inbound, mesh TLS only).
	headerClientID = "L5d-Client-Id"
	// headerProxyError explains a response the proxy made itself.
	headerProxyError = "L5d-Proxy-Error"
	// headerDenyReason names the class of an authorization denial
	// (unauthorized, no-route, invalid-path, ambiguous-request,
	// no-policy).
	headerDenyReason = "Weft-Deny-Reason"
)

// connInfo is what the proxy knows about the connection a request came
// on; handlers find it in the request context.
type connInfo struct {
	direction string
	h2        bool // the client speaks HTTP/2 on this connection

	// Outbound.
	svc *service

	// Inbound.
	port      uint16
	peer      authz.Conn
	target    netip.Addr // the address the client connected to, when known
	fromProxy bool       // mesh TLS with the transport header: a peer proxy
	dstName   string     // inbound: the authority the peer proxy resolved (transport header), checked with discovery before any use

	// Both directions.
	remote     netip.AddrPort // the client's address
	targetAddr netip.AddrPort // inbound: the pod address and application port; outbound: the original destination, when known
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
	h2opts  []h2client.Option // for the pool's HTTP/2 client connections
	appH1   *h1.Client        // HTTP/1 to the local application (inbound)
	extH1   *h1.Client        // HTTP/1 to unmeshed endpoints (outbound)
	pool    *connPool
	peerH1  *peerH1Pool // HTTP/1.1 over mesh TLS to peer proxies
}

func newHTTPRuntime(p *Proxy) (*httpRuntime, error) {
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
			p.m.http.Protocol.WithLabelValues(dir, "http1-"+strconv.Itoa(h1.StatusOf(err))).Inc()
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
			p.m.http.Protocol.WithLabelValues("", "http2-"+h2ErrorClass(errType)).Inc()
		},
		Logger: p.log,
	}

	// Clients. Every multiplexed connection (to peer proxies over mesh
	// TLS, and h2c to applications and unmeshed endpoints) is an
	// h2client.Conn with these settings.
	// The connection window is given back as response bytes arrive, so
	// a response nobody reads holds only its stream window and never
	// starves the others on a shared connection; what one connection
	// holds unread is bounded by twice its window (8 MiB by default),
	// past which the response read least recently loses its bytes (see
	// h2client's package doc).
	rt.h2opts = []h2client.Option{
		h2client.WithWindows(cfg.H2StreamWindow, cfg.H2ConnectionWindow),
		h2client.WithBufferLimit(h2BufferLimit(cfg)),
		h2client.WithMaxHeaderBytes(cfg.HTTPMaxHeaderBytes),
		h2client.WithKeepalive(30*time.Second, 15*time.Second),
		h2client.WithIdleTimeout(90 * time.Second),
		h2client.WithCountError(func(class string) {
			p.m.http.Protocol.WithLabelValues("client", "http2-"+h2ErrorClass(class)).Inc()
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
				return p.countedDial(c, l(addr)), nil
			},
			Reusable:       plainConnReusable,
			MaxIdlePerAddr: 256,
			IdleTimeout:    90 * time.Second,
			Limits:         h1.Limits{MaxHeaderBytes: cfg.HTTPMaxHeaderBytes},
			OmitTrailer:    isMeshHeader, // never forwarded as trailers
		}
	}
	rt.appH1 = newH1(func(string) *metricstore.Labels { return appLabels() })
	rt.extH1 = newH1(func(addr string) *metricstore.Labels {
		ap, _ := netip.ParseAddrPort(addr)
		return outboundDstLabels("", Endpoint{Addr: ap})
	})
	rt.pool = newConnPool(p)
	rt.peerH1 = newPeerH1Pool(p)
	return rt, nil
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
func (p *Proxy) serveHTTP(conn net.Conn, proto transport.Protocol, info *connInfo, l *metricstore.Labels, done func()) {
	ctx := context.WithValue(p.runCtx, infoKey{}, info)
	stats := p.m.opened(l)
	conn = &countedConn{Conn: conn, read: stats.read, wrt: stats.wrt}
	go func() {
		defer done()
		defer stats.closed()
		if proto == transport.HTTP2 {
			info.h2 = true
			// The connection's own copy of the settings carries the
			// connection's direction to the abuse report.
			h2cfg := *p.http.h2
			h2cfg.OnAbuse = func(reason string) {
				p.m.http.Protocol.WithLabelValues(info.direction, reason).Inc()
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

// serveRequest dispatches a request by the direction of its connection.
func (p *Proxy) serveRequest(w http.ResponseWriter, r *http.Request) {
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
func (p *Proxy) dispatch(w http.ResponseWriter, r *http.Request, info *connInfo) {
	if info.direction == Inbound {
		if p.access != nil {
			p.serveInboundLogged(w, r, info)
			return
		}
		p.serveInbound(w, r, info)
		return
	}
	p.serveOutbound(w, r, info)
}

// isGRPC reports whether a request is a gRPC call.
func isGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return r.ProtoMajor == 2 && strings.HasPrefix(ct, "application/grpc")
}

// gRPC status codes the proxy answers with.
const (
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcDeadlineExceeded = 4
	grpcPermissionDenied = 7
	grpcUnimplemented    = 12
	grpcInvalidArgument  = 3
)

// proxyErr is a response the proxy makes itself.
type proxyErr struct {
	status int    // HTTP status
	grpc   int    // gRPC status for gRPC calls
	class  string // reason class (metric label, header)
	msg    string
}

func (e *proxyErr) Error() string { return e.class + ": " + e.msg }

// writeProxyError answers a request with e: an HTTP status with a short
// text body, or for a gRPC call a trailers-only response with grpc-status
// and grpc-message. The l5d-proxy-error header names the class and
// message; deny is set for authorization denials (weft-deny-reason).
func writeProxyError(w http.ResponseWriter, grpc bool, e *proxyErr, deny bool) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set(headerProxyError, e.class+": "+sanitizeValue(e.msg))
	if deny {
		h.Set(headerDenyReason, e.class)
	}
	if grpc {
		h.Set("Content-Type", "application/grpc")
		h.Set("Grpc-Status", strconv.Itoa(e.grpc))
		h.Set("Grpc-Message", grpcEncode(e.msg))
		w.WriteHeader(http.StatusOK)
		return
	}
	body := http.StatusText(e.status) + ": " + e.msg + "\n"
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = io.WriteString(w, body)
}

func sanitizeValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// grpcEncode percent-encodes a grpc-message as the gRPC spec asks.
func grpcEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && i < 512; i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// outgoingRequest builds the request sent upstream: the client's method,
// authority, path and body with the given (already cleaned) header.
func outgoingRequest(ctx context.Context, r *http.Request, h http.Header, body io.ReadCloser, path, rawQuery string) *http.Request {
	u := &url.URL{Scheme: "http", Host: r.Host, Path: path, RawQuery: rawQuery}
	if unescaped, err := url.PathUnescape(path); err == nil {
		u.Path, u.RawPath = unescaped, path
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // no default agent from the Go clients
	}
	// Built on the stack: WithContext makes the one heap copy.
	out := http.Request{
		Method:        r.Method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		ContentLength: r.ContentLength,
		Host:          r.Host,
	}
	if body == nil || body == http.NoBody || r.ContentLength == 0 {
		// A server request's length 0 is a known empty body (for a client
		// request it would mean "unknown").
		out.Body = http.NoBody
		out.ContentLength = 0
	}
	if len(r.Trailer) > 0 {
		out.Trailer = r.Trailer
	}
	return (&out).WithContext(ctx)
}

// escapedPath returns the request's path as sent (percent-encoding kept).
func escapedPath(r *http.Request) string {
	p := r.URL.EscapedPath()
	if p == "" {
		p = "/"
	}
	return p
}

// forward1xx relays informational responses from upstream (103 Early
// Hints and the like) to the client, without hop-by-hop headers. 100 is
// generated by the proxy's own server and 101 only by the upgrade path.
// The trace and its state are one allocation per request.
func forward1xx(ctx context.Context, w http.ResponseWriter) context.Context {
	r := &relay1xx{w: w}
	r.trace.Got1xxResponse = r.got
	return httptrace.WithClientTrace(ctx, &r.trace)
}

// relay1xx is forward1xx's per-request state.
type relay1xx struct {
	trace httptrace.ClientTrace
	w     http.ResponseWriter
	n     int
}

func (r *relay1xx) got(code int, header textproto.MIMEHeader) error {
	if code == http.StatusContinue || code == http.StatusSwitchingProtocols || r.n >= 5 {
		return nil
	}
	r.n++
	h := r.w.Header()
	saved := h.Clone()
	for k := range h {
		delete(h, k)
	}
	for k, vs := range header {
		h[k] = vs
	}
	h1.RemoveHopByHop(h)
	removeMeshHeaders(h)
	r.w.WriteHeader(code)
	for k := range h {
		delete(h, k)
	}
	for k, vs := range saved {
		h[k] = vs
	}
	return nil
}

// copyResponse writes resp to w: status, header (cleaned by fix), body
// (flushed as it arrives when its length is unknown or it is gRPC) and
// trailers. touch is called as bytes move. It returns the trailers
// forwarded, the body bytes written and the first error: errClientGone
// when writing to the client failed, errUpstreamBody when reading the
// upstream body failed.
func copyResponse(w http.ResponseWriter, resp *http.Response, fix func(http.Header), touch func()) (trailer http.Header, written uint64, err error) {
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	for k, vs := range resp.Header {
		h[k] = vs
	}
	h1.RemoveHopByHop(h)
	fix(h)
	if resp.ContentLength < 0 && !bodyless(resp) {
		delete(h, "Content-Length")
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	stream := resp.ContentLength < 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc")
	if resp.Body != nil && resp.Body != http.NoBody {
		buf, put := getBodyBuf(resp.ContentLength)
		defer put(buf)
		for {
			n, rerr := resp.Body.Read(*buf)
			if n > 0 {
				if touch != nil {
					touch()
				}
				if _, werr := w.Write((*buf)[:n]); werr != nil {
					return nil, written, fmt.Errorf("%w: %w", errClientGone, werr)
				}
				written += uint64(n)
				// No flush when the body ended with these bytes (the
				// handler's return flushes them with the trailers) or more
				// are already there.
				if stream && flusher != nil && rerr == nil && !readReady(resp.Body) {
					flusher.Flush()
				}
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				return nil, written, fmt.Errorf("%w: %w", errUpstreamBody, rerr)
			}
		}
	}
	if len(resp.Trailer) > 0 {
		// The response is this exchange's alone and its body has ended:
		// its trailers are cleaned in place, not copied.
		tr := resp.Trailer
		h1.RemoveHopByHop(tr)
		fix(tr)
		for k, vs := range tr {
			if len(vs) > 0 {
				h[trailerKey(k)] = vs
			}
		}
		trailer = tr
	}
	return trailer, written, nil
}

// trailerKey is the response header key that sends k as a trailer
// (http.TrailerPrefix+k), without building the string for gRPC's.
func trailerKey(k string) string {
	switch k {
	case "Grpc-Status":
		return http.TrailerPrefix + "Grpc-Status"
	case "Grpc-Message":
		return http.TrailerPrefix + "Grpc-Message"
	case "Grpc-Status-Details-Bin":
		return http.TrailerPrefix + "Grpc-Status-Details-Bin"
	}
	return http.TrailerPrefix + k
}

func bodyless(resp *http.Response) bool {
	return resp.Request != nil && resp.Request.Method == http.MethodHead ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified
}

var (
	errClientGone   = errors.New("dataplane: client went away")
	errUpstreamBody = errors.New("dataplane: upstream failed mid-response")
	errIdleTimeout  = errors.New("dataplane: idle timeout")
)

// idleWatch cancels ctx when no byte moves for d; touch postpones it.
func idleWatch(ctx context.Context, d time.Duration) (context.Context, func(), func()) {
	if d <= 0 {
		return ctx, func() {}, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := time.AfterFunc(d, func() { cancel(errIdleTimeout) })
	return ctx, func() { t.Reset(d) }, func() { t.Stop(); cancel(nil) }
}

// touchReader calls touch on every read.
type touchReader struct {
	io.ReadCloser
	touch func()
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// hostOnly strips the port and a trailing dot from an authority.
func hostOnly(authority string) string {
	h := authority
	if host, _, err := net.SplitHostPort(authority); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// hostPort returns the port of an authority, or 0.
func hostPort(authority string) uint32 {
	if _, port, err := net.SplitHostPort(authority); err == nil {
		n, _ := strconv.ParseUint(port, 10, 16)
		return uint32(n)
	}
	return 0
}

// clientBody is the request body a handler forwards upstream. It keeps
// the first read error, so that an exchange that failed because the body
// did (a malformed chunk, a client that went away mid-upload) is blamed
// on the client and not on the upstream, and, when trailer is set, it
// removes the mesh's headers from the request's trailers as soon as they
// have arrived (at the end of the body, before they are sent on).
type clientBody struct {
	io.ReadCloser
	trailer http.Header
	failure atomic.Pointer[error]
}

// ReadReady reports whether a Read would return at once (the HTTP/2
// client then sends headers and body in one write).
func (b *clientBody) ReadReady() bool { return readReady(b.ReadCloser) }

// readReady asks a body whether a Read would return at once; bodies that
// cannot tell are not ready.
func readReady(r io.Reader) bool {
	rr, ok := r.(interface{ ReadReady() bool })
	return ok && rr.ReadReady()
}

func newClientBody(r *http.Request, cleanTrailer bool) *clientBody {
	b := &clientBody{ReadCloser: r.Body}
	if cleanTrailer {
		b.trailer = r.Trailer // only declared trailers are ever filled in
	}
	return b
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		if b.trailer != nil {
			h1.RemoveHopByHop(b.trailer)
			removeMeshHeaders(b.trailer)
		}
	case err != nil:
		b.fail(err)
	}
	return n, err
}

// fail keeps err as the body's failure unless one is kept already. It is
// a function of its own so that Read's error does not escape to the heap
// on every call.
func (b *clientBody) fail(err error) { b.failure.CompareAndSwap(nil, &err) }

// failed returns the error reading the body ended with, or nil.
func (b *clientBody) failed() error {
	if b == nil {
		return nil
	}
	if e := b.failure.Load(); e != nil {
		return *e
	}
	return nil
}

// classRequestBody names answers to a malformed request body.
const classRequestBody = "request-body"

// bodyFailure is the answer to an exchange whose request body failed:
// the status the body's framing error calls for (400), or 499 when the
// client went away in the middle of it.
func bodyFailure(err error) *proxyErr {
	if st := h1.StatusOf(err); st >= 400 && st < 500 {
		return &proxyErr{st, grpcInternal, classRequestBody, "the request body is malformed: " + err.Error()}
	}
	return &proxyErr{499, grpcUnavailable, "client-gone", "the client went away in the middle of the request body"}
}

// abort ends the exchange without a proper end of stream: HTTP/2 resets
// the stream, HTTP/1 closes the connection.
func abort() { panic(http.ErrAbortHandler) }

// countedConn counts the bytes of a connection in the transport metrics
// (tcp_read_bytes_total, tcp_write_bytes_total).
type countedConn struct {
	net.Conn
	read, wrt *metricstore.Series
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.AddN(uint64(n))
	}
	return n, err
}

// NetConn returns the connection countedConn wraps.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.wrt.AddN(uint64(n))
	}
	return n, err
}
