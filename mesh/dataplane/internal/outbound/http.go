package outbound

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/framerelay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// outboundHeader is the request header sent upstream: the client's
// without hop-by-hop and mesh headers, with the route's filters applied.
func outboundHeader(r *http.Request, mods ...*route.HeaderModifier) http.Header {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h1.RemoveHopByHop(h)
	httpcore.RemoveMeshHeaders(h)
	for _, m := range mods {
		m.Apply(h)
	}
	return h
}

// cleanInPlace is outboundHeader without filters, editing the client's
// header itself.
func cleanInPlace(r *http.Request) http.Header {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	h1.RemoveHopByHop(r.Header)
	httpcore.RemoveMeshHeaders(r.Header)
	return r.Header
}

// HTTP is the outbound HTTP side: every request from the local
// application on a connection the L4 outbound path (internal/l4) found
// a Service for. It is given what it reads of the proxy as values and
// plain funcs, filled once by l4.New; the request's own state
// stays on the serving goroutine's stack.
type HTTP struct {
	// RoundTrip sends a request to one endpoint over the proxy's pools
	// (HTTP/1.1 or HTTP/2 over mesh TLS to a peer proxy, h2c or HTTP/1
	// to an unmeshed endpoint), as the downstream client from, whose
	// share of the HTTP/1.1 pool it uses. body is the request's kept
	// body (nil when none is kept): a request the upstream refused
	// unprocessed is sent once more only while body.Replayable(). A
	// failure to connect is an httpcore.DialError, a wait for a pooled
	// connection past its deadline a *PoolTimeoutError.
	RoundTrip func(req *http.Request, ep endpoint.Endpoint, clientH2 bool, from netip.Addr, body *ReplayBody) (*http.Response, error)

	// RoundTripFields is RoundTrip for the frame path (ServeFrames): a
	// gRPC call from an HTTP/2 client, sent in header fields over the
	// HTTP/2 pools (to a peer proxy over mesh TLS, h2c to an unmeshed
	// endpoint), with the same errors. The request is passed by value:
	// it does not escape to the heap on the way.
	RoundTripFields func(ctx context.Context, req httpcore.FieldRequest, ep endpoint.Endpoint, body *ReplayBody) (httpcore.FieldResponse, error)

	// An upgrade's own connection: to a meshed endpoint over mesh TLS
	// with the transport header (DialEndpoint), to an unmeshed one as a
	// connection of the proxy's own (Dial) within ConnectTimeout.
	DialEndpoint   func(ctx context.Context, ep endpoint.Endpoint, target string, proto transport.Protocol, prefix []byte) (net.Conn, error)
	Dial           func(ctx context.Context, addr string) (net.Conn, error)
	ConnectTimeout time.Duration

	Metrics *reqmetrics.HTTP // Weft's retry and error counters (the series are the Service's)
	Tap     *tap.Hub
	Log     *slog.Logger
	Now     func() time.Time
}

// Serve proxies one request from the local application, which came on
// conn and goes to svc, in steps: select its route; answer it here when
// the route says so (no route, a redirect, an injected fault); bound it
// by the route's timeouts; then send it, in attempts within the retry
// budget (an upgrade on a connection of its own), and relay the answer
// or answer the error (outboundAnswer).
func (h *HTTP) Serve(w http.ResponseWriter, r *http.Request, conn *httpcore.Conn, svc Service) {
	c := outboundCall{h: h, w: w, r: r, conn: conn, svc: svc, grpc: httpcore.IsGRPC(r),
		method: r.Method, reqCtx: r.Context(), contentLength: r.ContentLength,
		hasBody: r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0}
	c.serve()
}

// serve is Serve's steps, on either path (ServeFrames).
func (c *outboundCall) serve() {
	c.selectRoute()
	defer c.endTap() // ends an upgraded or aborted request; no-op once ended
	if c.answeredByRoute() {
		return
	}
	c.bound()
	defer c.release()
	if c.r != nil {
		if up, ok := h1.Upgrade(c.r); ok && !c.conn.H2 {
			c.h.outboundUpgrade(c, up)
			return
		}
	}
	c.prepareBody()
	if c.rb != nil {
		defer c.rb.close()
	}
	var a outboundAttempt
	if err := c.run(&a); err != nil {
		c.fail(err)
		return
	}
	defer a.cancel()
	if c.st != nil {
		c.relayFrames(&a)
		return
	}
	c.relay(&a)
}

// selectRoute picks the request's route by its normalized path, and
// starts its metrics.
func (c *outboundCall) selectRoute() {
	var host, rawQuery string
	var hdr http.Header
	c.router = c.svc.Router()
	if st := c.st; st != nil {
		// A plain path (AcceptGRPC): its own escaped form, no query.
		c.rawPath, host = st.Path(), st.Authority()
		if c.router.ReadsHeaders() {
			hdr = httpcore.FieldHeader(st.Fields())
		}
	} else {
		c.rawPath, host, rawQuery, hdr = httpcore.EscapedPath(c.r), c.r.Host, c.r.URL.RawQuery, c.r.Header
	}
	routePath := c.rawPath
	if np, err := pathnorm.Normalize(c.rawPath); err == nil {
		routePath = np
	}
	c.rt = c.router.Select(route.Request{
		Method: c.method, Path: routePath, RawQuery: rawQuery, Host: hostOnly(host),
		Header: hdr, HTTP2: c.conn.H2, GRPC: c.grpc,
	})
	c.stats.Begin(c.svc.RouteSeries(c.rt.Name), time.Now())
}

func (c *outboundCall) endTap() { tap.End(&c.tr, 0, -1, -1, nil) }

// answeredByRoute answers the requests that are not sent on: CONNECT
// (served by its own listener), no matching route, a redirect, a failure
// the route injects.
func (c *outboundCall) answeredByRoute() bool {
	switch rt := c.rt; {
	case c.method == http.MethodConnect:
		c.fail(errConnectInHTTP)
	case route.NotFound(rt):
		c.fail(errNoRoute)
	case rt.Redirect != nil:
		c.redirect()
	case rt.Fail.Hit():
		c.fail(&faultError{rt.Fail})
	default:
		return false
	}
	return true
}

// redirect answers with the route's redirect.
func (c *outboundCall) redirect() {
	if c.st != nil {
		c.redirectFrames()
		return
	}
	r, rt, w := c.r, c.rt, c.w
	loc := rt.Redirect.Location("http", hostOnly(r.Host), hostPort(r.Host), r.URL.Path, r.URL.RawQuery, rt.MatchedPrefix())
	w.Header().Set("Location", loc)
	w.Header().Set("Content-Length", "0")
	c.tapStart(nil)
	w.WriteHeader(rt.Redirect.Status)
	c.stats.Attempt(c.svc.LocalSeries())
	c.stats.Head(rt.Redirect.Status)
	c.stats.Done(rt.Redirect.Status, "", false, "")
	c.tr.ResponseInit(rt.Redirect.Status, w.Header(), c.conn.H2)
	tap.End(&c.tr, 0, -1, -1, nil)
}

// bound puts the route's request and idle timeouts on the request's
// context; release ends them.
func (c *outboundCall) bound() {
	ctx := c.reqCtx
	if d := c.rt.Timeouts.Request; d > 0 {
		ctx, c.cancelRequest = context.WithTimeout(ctx, d)
	}
	c.ctx, c.touch, c.stopIdle = idleWatch(ctx, c.rt.Timeouts.Idle)
}

func (c *outboundCall) release() {
	c.stopIdle()
	if c.cancelRequest != nil {
		c.cancelRequest()
	}
}

// relay sends the response the last attempt got to the client, with the
// route's response filters, and records how the exchange ended: a stream
// the upstream broke is broken to the client too.
func (c *outboundCall) relay(a *outboundAttempt) {
	rt := c.rt
	meshed := a.h.Value().Identity != ""
	framerelay.RelayResponse(c.w, a.resp, c.conn.H2, framerelay.Exchange{
		Classes: rt.Classes, Stats: &c.stats, Tap: &c.tr, Touch: c.touch,
		Fix: func(h http.Header) {
			httpcore.CleanResponseHeader(h, meshed)
			rt.ResponseHeaders.Apply(h)
		},
	})
}

// faultErr is the answer of a failure injector: its HTTP status, or its
// gRPC code (UNAVAILABLE for an HTTP injector that hits a gRPC call).
func faultErr(f *route.Fault) *httpcore.Answer {
	status, code := f.Status, int(f.GRPCCode)
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if !f.GRPC {
		code = httpcore.GRPCUnavailable
	}
	return &httpcore.Answer{Status: status, GRPC: code, Class: "fault-injected", Msg: f.Message}
}

// retryableResponse reports whether a response matches the retry
// conditions (status ranges, gRPC codes in a trailers-only response, or
// the profile's failure class).
func retryableResponse(rp *route.Retry, status int, gs string, failure bool) bool {
	if rp.RetryableStatus(status) {
		return true
	}
	if gs != "" && len(rp.GRPCCodes) > 0 {
		if n, err := strconv.ParseUint(gs, 10, 32); err == nil && rp.GRPCCodes[uint32(n)] {
			return true
		}
	}
	return rp.OnFailureClass && failure
}

var errIdleTimeout = errors.New("dataplane: idle timeout")

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
