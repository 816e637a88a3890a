package dataplane

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// denial maps an authorization result to the answer: 403 for a client
// no authorization admits (and for a port without policy), 404 for a
// request no route matches, 400 for a path or request the evaluator
// refuses as ambiguous. gRPC calls always get PERMISSION_DENIED; the
// weft-deny-reason header names the class either way.
func denial(reason authz.Reason, detail string) *proxyErr {
	class := reason.String()
	switch reason {
	case authz.ReasonNoRoute:
		return &proxyErr{http.StatusNotFound, grpcPermissionDenied, class, "no route of the server matches the request"}
	case authz.ReasonInvalidPath:
		return &proxyErr{http.StatusBadRequest, grpcPermissionDenied, class, "the request path is ambiguous or malformed"}
	case authz.ReasonAmbiguousRequest:
		return &proxyErr{http.StatusBadRequest, grpcPermissionDenied, class, "a header or query parameter a route matches on has conflicting values"}
	}
	if detail == "" {
		detail = "no authorization admits the client"
	}
	return &proxyErr{http.StatusForbidden, grpcPermissionDenied, class, detail}
}

// serveInbound authorizes one request for the local application and
// forwards it there.
func (p *Proxy) serveInbound(w http.ResponseWriter, r *http.Request, info *connInfo) {
	grpc := isGRPC(r)
	// The port's label is formatted only where a metric needs it (the
	// error paths), not on every request.
	portLabel := func() string { return strconv.Itoa(int(info.port)) }
	now := time.Now()

	if r.Method == http.MethodConnect {
		// CONNECT would turn the request into a tunnel past HTTP policy;
		// the application is reached by plain requests only. Refused
		// before policy, it is not an inbound request (request_total), as
		// a denied one is not: http_errors_total counts it.
		p.m.http.errors.WithLabelValues(Inbound, portLabel(), "connect-refused").Inc()
		writeProxyError(w, grpc, &proxyErr{http.StatusMethodNotAllowed, grpcUnimplemented, "connect-refused", "CONNECT is not forwarded to the application"}, false)
		return
	}

	target := r.RequestURI
	if !strings.HasPrefix(target, "/") {
		target = escapedPath(r)
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
	}
	var res authz.Result
	var deny *proxyErr
	st, err := p.pols.get(r.Context(), uint32(info.port))
	cache := st
	switch {
	case err != nil:
		cache = p.noPolicy
		deny = denial(authz.ReasonNoPolicy, err.Error())
	case !serverIPsAllow(st.proto, info.target):
		deny = denial(authz.ReasonUnauthorized, "the server does not listen on the address the client used")
	default:
		res = authz.Evaluate(st.srv, info.peer, &authz.Request{Method: r.Method, Path: target, Host: r.Host, Header: r.Header})
		if res.Decision == authz.Deny {
			deny = denial(res.Reason, "")
		}
	}
	denyClass := ""
	var pr profRoute
	var classes []route.ResponseClass // the profile route's response classes
	if deny != nil {
		denyClass = deny.class
	} else {
		pr, classes = p.profileRoute(r, info, &res)
	}
	series := p.inboundSeries(cache, info, &res, denyClass, pr)
	series.use(now)
	series.authz.Inc()
	var tr *tap.Request // set when an open tap takes the request
	if p.tap.On() {
		tr = p.tapInbound(r, info, st, &res)
		defer tap.End(&tr, 0, -1, -1, nil) // ends an upgraded or aborted request; no-op once ended
	}
	if deny != nil {
		p.log.Info("inbound request denied", "port", info.port, "reason", deny.class, "peer_id", info.peer.Identity, "method", r.Method)
		writeProxyError(w, grpc, deny, true)
		tr.ResponseInit(deny.status, w.Header(), info.h2)
		tap.End(&tr, 0, tap.GRPCStatus(grpcStatusOf(grpc, deny)), -1, nil)
		return
	}
	if res.Decision == authz.Audit {
		p.log.Info("inbound request admitted by audit policy", "port", info.port, "route", routeName(&res), "peer_id", info.peer.Identity)
	}
	if e := p.rateLimit(w, grpc, st, info, &res); e != nil { // ratelimit_inbound.go
		tr.ResponseInit(e.status, w.Header(), info.h2)
		tap.End(&tr, 0, tap.GRPCStatus(grpcStatusOf(grpc, e)), -1, nil)
		return
	}
	var stats reqStats
	stats.begin(series.rt, now)
	stats.attempt(series.ep)
	fail := func(e *proxyErr) {
		p.m.http.errors.WithLabelValues(Inbound, portLabel(), e.class).Inc()
		writeProxyError(w, grpc, e, false)
		stats.head(e.status)
		stats.done(e.status, grpcStatusOf(grpc, e), true, e.class)
		tr.ResponseInit(e.status, w.Header(), info.h2)
		tap.End(&tr, 0, tap.GRPCStatus(grpcStatusOf(grpc, e)), -1, nil)
	}

	// The request as the application sees it: the normalized path the
	// policy decided on, no hop-by-hop or mesh headers from the client,
	// the verified client identity from this proxy.
	orig := ""
	if info.fromProxy && info.h2 {
		orig = origProto(r.Header.Get(headerOrigProto))
		if orig == "" && len(r.Header[headerOrigProto]) > 0 {
			p.log.Debug("inbound l5d-orig-proto ignored: not a value a proxy sends", "value", r.Header.Get(headerOrigProto),
				"peer_id", info.peer.Identity)
		}
	}
	up, upgrade := h1.Upgrade(r)
	upgrade = upgrade && !info.h2
	hdr := r.Header // the request is not used again: edited in place
	if hdr == nil {
		hdr = http.Header{}
	}
	h1.RemoveHopByHop(hdr)
	removeMeshHeaders(hdr)
	if info.peer.TLS && info.peer.Identity != "" {
		hdr[headerClientID] = []string{info.peer.Identity}
	}
	toH2 := info.h2 && orig == ""
	if !toH2 {
		if name, ok := h1.CheckHeader(hdr); !ok {
			fail(&proxyErr{http.StatusBadRequest, grpcInvalidArgument, "invalid-header", "header " + name + " cannot be sent over HTTP/1"})
			return
		}
	}
	path, rawQuery := escapedPath(r), r.URL.RawQuery
	if res.Path != "" {
		path = res.Path
	}
	app := netip.AddrPortFrom(p.forwardAddr, info.port)

	if upgrade {
		p.forwardUpgrade(r.Context(), w, r, hdr, up, func(ctx context.Context) (net.Conn, error) {
			return p.dialWithin(ctx, app.String())
		}, func(err error) { e := outboundAnswer(err); fail(&e) }, &stats, nil, false)
		return
	}

	// The body keeps its first error, and its trailers lose the mesh's
	// headers as they arrive.
	var body io.ReadCloser = r.Body
	var cbody *clientBody
	if body != nil && body != http.NoBody {
		cbody = newClientBody(r, true)
		body = cbody
	}
	req := outgoingRequest(forward1xx(r.Context(), w), r, hdr, body, path, rawQuery)
	var resp *http.Response
	upstreamDone := upstreamTimer(w)
	if toH2 {
		resp, err = p.http.pool.roundTrip(poolKey{addr: app}, req, func() bool { return false }, dialLabels{inbound: true})
	} else {
		resp, err = p.http.appH1.RoundTrip(req, app.String())
	}
	upstreamDone()
	if err != nil {
		var de *dialError
		var he *h1.DialError
		switch {
		case r.Context().Err() != nil:
			fail(&proxyErr{499, grpcUnavailable, "client-gone", "the client went away"})
		case cbody.failed() != nil:
			fail(bodyFailure(cbody.failed()))
		case errors.As(err, &de), errors.As(err, &he):
			fail(&proxyErr{http.StatusBadGateway, grpcUnavailable, "app-unreachable", "the application is not reachable"})
		default:
			fail(&proxyErr{http.StatusBadGateway, grpcUnavailable, "app", err.Error()})
		}
		return
	}
	defer resp.Body.Close()
	// Classified as the outbound side does: the ServiceProfile route's
	// response classes when it has them, else 5xx or a non-zero
	// grpc-status.
	gs := resp.Header.Get("Grpc-Status")
	failure := route.Failure(classes, resp.StatusCode, gs)
	stats.head(resp.StatusCode)
	tr.ResponseInit(resp.StatusCode, resp.Header, info.h2)
	trailer, n, err := copyResponse(w, resp, removeMeshHeaders, nil)
	if tgs := trailer.Get("Grpc-Status"); tgs != "" {
		gs = tgs
		failure = route.Failure(classes, resp.StatusCode, gs)
	}
	if err != nil {
		stats.done(resp.StatusCode, gs, true, streamErrorClass(err))
		tap.End(&tr, n, -1, tapResetCode(err), nil)
		if errors.Is(err, errUpstreamBody) {
			abort()
		}
		return
	}
	stats.done(resp.StatusCode, gs, failure, "")
	tap.End(&tr, n, tap.GRPCStatus(gs), -1, trailer)
}

// grpcStatusOf is the grpc-status of an answer the proxy made itself
// (empty when the call is not gRPC).
func grpcStatusOf(grpc bool, e *proxyErr) string {
	if !grpc {
		return ""
	}
	return strconv.Itoa(e.grpc)
}

// streamErrorClass names why a response stream did not complete, for the
// error label.
func streamErrorClass(err error) string {
	switch {
	case errors.Is(err, errClientGone):
		return "client-gone"
	case errors.Is(err, errUpstreamBody):
		return "upstream-reset"
	}
	return "error"
}

// origProto returns the HTTP/1 version an l5d-orig-proto value carries,
// or "" for any value other than those Linkerd's proxies send (Weft's
// send "HTTP/1.1"): "HTTP/1.1" or "HTTP/1.0", optionally followed by
// "; absolute-form". The inbound proxy honours the header only on an
// HTTP/2 request from a peer proxy with a verified identity; a request
// whose value is unknown stays HTTP/2, as Linkerd's proxy leaves it, and
// the header is dropped with the mesh's others either way.
func origProto(v string) string {
	switch v {
	case "HTTP/1.1", "HTTP/1.1; absolute-form":
		return "HTTP/1.1"
	case "HTTP/1.0", "HTTP/1.0; absolute-form":
		return "HTTP/1.0"
	}
	return ""
}

// profileRoute returns the route-level labels of an admitted inbound
// request: the Service its peer proxy named (l5d-dst-canonical, or the
// transport header's name) and the profile route the request matches,
// with that route's response classes, when discovery knows that name as
// a Service. The header is read only from a peer proxy, and only when it
// has one value; it is removed before the request reaches the
// application either way.
func (p *Proxy) profileRoute(r *http.Request, info *connInfo, res *authz.Result) (profRoute, []route.ResponseClass) {
	if !info.fromProxy || !info.peer.TLS {
		return profRoute{name: defaultRouteName}, nil
	}
	name := info.dstName
	if v := r.Header.Values(headerDstCanonical); len(v) == 1 {
		name = v[0]
	}
	if name == "" {
		return profRoute{name: defaultRouteName}, nil
	}
	path := res.Path
	if path == "" {
		path = escapedPath(r)
		if np, err := pathnorm.Normalize(path); err == nil {
			path = np
		}
	}
	dst, rt, classes := p.inboundRoute(r.Context(), name, r.Method, path)
	return profRoute{dst: dst, name: rt}, classes
}
