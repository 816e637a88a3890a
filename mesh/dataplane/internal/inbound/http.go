package inbound

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/framerelay"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// direction is the direction label of the inbound metrics.
const direction = "inbound"

// HTTP is the proxy's inbound HTTP side: it serves the requests for the
// local application (Serve). What it reads of the proxy it is given, as
// values and functions: the policy cache and the profile routes (shared
// with the L4 inbound path and discovery), the request metrics, the tap
// hub, and the clients to the application (the HTTP/2 pool is shared
// with the outbound side). Each function is a plain func value, called
// at most once per request, and none allocates; none is an interface.
type HTTP struct {
	// Policy returns the port's current policy, waiting for the first
	// (the policy cache); NoPolicy caches the series of requests to a
	// port it has none for.
	Policy   func(ctx context.Context, port uint32) (*Policy, error)
	NoPolicy *Policy
	// Route returns the dst label, the profile route and its response
	// classes of a request whose peer proxy named the Service name.
	Route func(ctx context.Context, name, method, path string) (dst, rt string, classes []route.ResponseClass)

	Metrics *reqmetrics.HTTP
	Tap     *tap.Hub
	Log     *slog.Logger

	// The application: its address (the ports are the requests'), the
	// dialer of an upgrade's own connection, the HTTP/1 client and the
	// HTTP/2 round trip.
	App   netip.Addr
	Dial  func(ctx context.Context, addr string) (net.Conn, error)
	AppH1 *h1.Client
	AppH2 func(req *http.Request, app netip.AddrPort) (*http.Response, error)
	// AppH2Fields is the HTTP/2 round trip of the frame path
	// (ServeFrames), in header fields.
	AppH2Fields func(ctx context.Context, req *FieldRequest, app netip.AddrPort) (FieldResponse, error)
	// UpstreamTimer marks the wait for the application's response head
	// (the access log's upstream time); the function it returns ends it.
	UpstreamTimer func(w http.ResponseWriter) func()
}

// inboundCall is one request for the local application, with what its
// steps share: the policy's decision, the profile route's response
// classes, the request's metrics and its tap. It lives on the serving
// goroutine's stack.
type inboundCall struct {
	h    *HTTP
	w    http.ResponseWriter
	r    *http.Request
	st   FrameStream // instead of w and r on the frame path (ServeFrames)
	info *Conn
	grpc bool

	res     authz.Result          // the policy's decision (zero without a policy)
	classes []route.ResponseClass // the profile route's response classes
	series  *seriesEntry
	now     time.Time
	cbody   *httpcore.ClientBody // keeps the body's first read error

	stats reqmetrics.Stats // zero (recording nothing) until the request counts as an inbound request
	tr    *tap.Request     // set when an open tap took the request
}

// Serve proxies one request for the local application, in steps:
// refuse CONNECT; authorize it by the port's policy and rate limit;
// prepare the header the application sees; then forward it (an upgrade
// on a connection of its own) and relay the answer, or answer the cause
// of a failure (inboundAnswer).
func (h *HTTP) Serve(w http.ResponseWriter, r *http.Request, info *Conn) {
	c := inboundCall{h: h, w: w, r: r, info: info, grpc: httpcore.IsGRPC(r), now: time.Now()}
	if r.Method == http.MethodConnect {
		// CONNECT would turn the request into a tunnel past HTTP policy;
		// the application is reached by plain requests only. Refused
		// before policy, it is not an inbound request (request_total), as
		// a denied one is not: http_errors_total counts it.
		c.fail(errConnectToApp)
		return
	}
	defer c.endTap() // ends an upgraded or aborted request; no-op once ended
	if err := c.authorize(); err != nil {
		c.fail(err)
		return
	}
	c.stats.Begin(c.series.rt, c.now)
	c.stats.Attempt(c.series.ep)

	up, upgrade := h1.Upgrade(r) // before the header loses its hop-by-hop fields
	upgrade = upgrade && !info.H2
	hdr, toH2, err := c.header()
	if err != nil {
		c.fail(err)
		return
	}
	app := netip.AddrPortFrom(h.App, info.Port)
	if upgrade {
		c.upgrade(hdr, up, app)
		return
	}
	resp, err := c.send(hdr, toH2, app)
	if err != nil {
		c.fail(c.cause(err))
		return
	}
	c.relay(resp)
}

func (c *inboundCall) endTap() { tap.End(&c.tr, 0, -1, -1, nil) }

// upgrade forwards a protocol upgrade (WebSocket) to the application on a
// connection of its own, as the outbound side does
// (httpcore.ForwardUpgrade).
func (c *inboundCall) upgrade(hdr http.Header, up string, app netip.AddrPort) {
	h := c.h
	httpcore.ForwardUpgrade(c.r.Context(), c.w, c.r, &httpcore.Upgrade{
		Proto: up, Header: hdr,
		Dial: func(ctx context.Context) (net.Conn, error) {
			return h.Dial(ctx, app.String())
		},
		Fail: c.fail,
		Head: func(status int) { c.stats.Head(status) },
		Done: func(status int, failure bool) { c.stats.Done(status, "", failure, "") },
	})
}

// authorize decides on the request by the port's policy (its server, the
// server's authorizations and routes), starts its metrics (the
// authorization counters and the series of its route) and offers it to
// the open taps; a request the policy admits is then counted against the
// port's rate limit. It returns why the request is refused (*denyError,
// *rateLimitError), or nil.
func (c *inboundCall) authorize() error {
	r := c.r
	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		target = httpcore.EscapedPath(r)
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
	}
	v := r.Header.Values(httpcore.HeaderDstCanonical)
	canonical := ""
	if len(v) == 1 {
		canonical = v[0]
	}
	return c.decide(r.Context(), &authz.Request{Method: r.Method, Path: target, Host: r.Host, Header: r.Header}, canonical, len(v) == 1)
}

// decide is authorize's part that both paths share (Serve's and
// ServeFrames'), given the request as the evaluator reads it and the
// l5d-dst-canonical value (named says the request has exactly one). On the
// frame path areq has no header: it is built from the fields only when
// the port's policy matches on headers.
func (c *inboundCall) decide(ctx context.Context, areq *authz.Request, canonical string, named bool) error {
	h, info := c.h, c.info
	var deny *denyError
	st, err := h.Policy(ctx, uint32(info.Port))
	cache := st
	switch {
	case err != nil:
		cache = h.NoPolicy
		deny = &denyError{authz.ReasonNoPolicy, err.Error()}
	case !ServerIPsAllow(st.Proto, info.Target):
		deny = &denyError{authz.ReasonUnauthorized, "the server does not listen on the address the client used"}
	default:
		if c.st != nil && matchesHeaders(st.Srv) {
			areq.Header = httpcore.FieldHeader(c.st.Fields())
		}
		c.res = authz.Evaluate(st.Srv, info.Peer, areq)
		if c.res.Decision == authz.Deny {
			deny = &denyError{reason: c.res.Reason}
		}
	}
	denyClass := ""
	var pr profRoute
	if deny != nil {
		denyClass = deny.reason.String()
	} else {
		pr, c.classes = h.profileRoute(ctx, areq.Method, c.escapedPath(), canonical, named, info, &c.res)
	}
	c.series = h.inboundSeries(cache, info, &c.res, denyClass, pr)
	c.series.use(c.now)
	c.series.authz.Inc()
	if h.Tap.On() {
		// An open tap keeps the decision for the request's events: it
		// gets a copy, so that the call stays on the stack (and nothing
		// is allocated for it while no tap is open).
		res := c.res
		r := c.r
		if r == nil {
			r = httpcore.FrameRequest(c.st, c.st.Fields())
		}
		c.tr = h.tapInbound(r, info, st, &res)
	}
	if deny != nil {
		return deny
	}
	if c.res.Decision == authz.Audit {
		h.Log.Info("inbound request admitted by audit policy", "port", info.Port, "route", routeName(&c.res), "peer_id", info.Peer.Identity)
	}
	return h.rateLimit(st, info, &c.res) // ratelimit.go
}

// escapedPath is the request's path as sent, without its query.
func (c *inboundCall) escapedPath() string {
	if c.r == nil {
		return c.st.Path() // AcceptGRPC took only plain paths, without a query
	}
	return httpcore.EscapedPath(c.r)
}

// header returns the request header as the application sees it (edited
// in place: the request is not used again): no hop-by-hop or mesh headers
// from the client, the verified client identity from this proxy. toH2
// says whether the request goes to the application over HTTP/2: an
// HTTP/2 request does unless its peer proxy says it was HTTP/1
// (l5d-orig-proto), and one that does not must have a header HTTP/1 can
// carry.
func (c *inboundCall) header() (hdr http.Header, toH2 bool, err error) {
	r, info := c.r, c.info
	orig := ""
	if info.FromProxy && info.H2 {
		orig = httpcore.OrigProto(r.Header.Get(httpcore.HeaderOrigProto))
		if orig == "" && len(r.Header[httpcore.HeaderOrigProto]) > 0 {
			c.h.Log.Debug("inbound l5d-orig-proto ignored: not a value a proxy sends", "value", r.Header.Get(httpcore.HeaderOrigProto),
				"peer_id", info.Peer.Identity)
		}
	}
	hdr = r.Header
	if hdr == nil {
		hdr = http.Header{}
	}
	h1.RemoveHopByHop(hdr)
	httpcore.RemoveMeshHeaders(hdr)
	if info.Peer.TLS && info.Peer.Identity != "" {
		hdr[httpcore.HeaderClientID] = []string{info.Peer.Identity}
	}
	toH2 = info.H2 && orig == ""
	if !toH2 {
		if name, ok := h1.CheckHeader(hdr); !ok {
			return nil, false, &headerError{name}
		}
	}
	return hdr, toH2, nil
}

// send forwards the request to the application at app, with the
// normalized path the policy decided on, and waits for the response head.
// The body keeps its first error, and its trailers lose the mesh's
// headers as they arrive.
func (c *inboundCall) send(hdr http.Header, toH2 bool, app netip.AddrPort) (*http.Response, error) {
	r := c.r
	body := r.Body
	if body != nil && body != http.NoBody {
		c.cbody = httpcore.NewClientBody(r, true)
		body = c.cbody
	}
	path, rawQuery := httpcore.EscapedPath(r), r.URL.RawQuery
	if c.res.Path != "" {
		path = c.res.Path
	}
	req := httpcore.OutgoingRequest(httpcore.Forward1xx(r.Context(), c.w), r, hdr, body, path, rawQuery)
	var resp *http.Response
	var err error
	upstreamDone := c.h.UpstreamTimer(c.w)
	if toH2 {
		resp, err = c.h.AppH2(req, app)
	} else {
		resp, err = c.h.AppH1.RoundTrip(req, app.String())
	}
	upstreamDone()
	return resp, err
}

// cause names why send got no response, for inboundAnswer: the client
// went away or its body failed, the application could not be reached, or
// the exchange with it failed.
func (c *inboundCall) cause(err error) error {
	var de *httpcore.DialError
	var he *h1.DialError
	switch {
	case c.context().Err() != nil:
		return httpcore.ErrClientGone
	case c.cbody.Failed() != nil:
		return &httpcore.RequestBodyError{Err: c.cbody.Failed()}
	case errors.As(err, &de), errors.As(err, &he):
		return &appError{err: err, dial: true}
	}
	return &appError{err: err}
}

// relay sends the application's response to the client without mesh
// headers, and records how the exchange ended: classified as the
// outbound side does (the ServiceProfile route's response classes when it
// has them, else 5xx or a non-zero grpc-status); a stream the application
// broke is broken to the client too.
func (c *inboundCall) relay(resp *http.Response) {
	framerelay.RelayResponse(c.w, resp, c.info.H2, framerelay.Exchange{
		Classes: c.classes, Stats: &c.stats, Tap: &c.tr, Fix: httpcore.RemoveMeshHeaders,
	})
}

// fail answers the request for the proxy, for the reason err gives
// (inboundAnswer), and records it. A denial is logged and names its class
// in weft-deny-reason; a rate-limited request is answered as Linkerd's
// proxy answers it (writeRateLimited); both were counted where they were
// decided (the authorization and rate-limit counters). Any other answer
// counts in http_errors_total and, once the request is an inbound request
// (request_total; CONNECT is not), in its metrics.
//
// On the frame path the answer is the same header fields, written as a
// trailers-only response (answerFrames).
func (c *inboundCall) fail(err error) {
	e := inboundAnswer(err)
	gs := httpcore.GRPCStatusOf(c.grpc, &e)
	switch err.(type) {
	case *denyError:
		c.h.Log.Info("inbound request denied", "port", c.info.Port, "reason", e.Class, "peer_id", c.info.Peer.Identity, "method", c.method())
		if c.st != nil {
			c.answerFrames(e.Status, httpcore.GRPCAnswerFields(&e, true))
		} else {
			httpcore.WriteAnswer(c.w, c.grpc, &e, true)
		}
	case *rateLimitError:
		if c.st != nil {
			c.answerFrames(e.Status, rateLimitedFields(e.Msg))
		} else {
			writeRateLimited(c.w, c.grpc, e.Msg)
		}
	default:
		// The port's label is formatted only here, not on every request.
		c.h.Metrics.Errors.WithLabelValues(direction, strconv.Itoa(int(c.info.Port)), e.Class).Inc()
		if c.st != nil {
			c.answerFrames(e.Status, httpcore.GRPCAnswerFields(&e, false))
		} else {
			httpcore.WriteAnswer(c.w, c.grpc, &e, false)
		}
		c.stats.Head(e.Status)
		c.stats.Done(e.Status, gs, true, e.Class)
	}
	if c.st == nil {
		c.tr.ResponseInit(e.Status, c.w.Header(), c.info.H2)
	}
	tap.End(&c.tr, 0, tap.GRPCStatus(gs), -1, nil)
}

// context is the request's context.
func (c *inboundCall) context() context.Context {
	if c.st != nil {
		return c.st.Context()
	}
	return c.r.Context()
}

// method is the request's method.
func (c *inboundCall) method() string {
	if c.st != nil {
		return c.st.Method()
	}
	return c.r.Method
}

// profileRoute returns the route-level labels of an admitted inbound
// request: the Service its peer proxy named (l5d-dst-canonical, or the
// transport header's name) and the profile route the request matches,
// with that route's response classes, when discovery knows that name as
// a Service. The header is read only from a peer proxy, and only when it
// has one value; it is removed before the request reaches the
// application either way.
func (h *HTTP) profileRoute(ctx context.Context, method, escPath, canonical string, named bool, info *Conn, res *authz.Result) (profRoute, []route.ResponseClass) {
	if !info.FromProxy || !info.Peer.TLS {
		return profRoute{name: route.DefaultName}, nil
	}
	name := info.DstName
	if named {
		name = canonical
	}
	if name == "" {
		return profRoute{name: route.DefaultName}, nil
	}
	path := res.Path
	if path == "" {
		path = escPath
		if np, err := pathnorm.Normalize(path); err == nil {
			path = np
		}
	}
	dst, rt, classes := h.Route(ctx, name, method, path)
	return profRoute{dst: dst, name: rt}, classes
}
