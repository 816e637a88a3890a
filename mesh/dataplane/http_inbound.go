package dataplane

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/weftmesh/weft/mesh/dataplane/h1"
	"github.com/weftmesh/weft/mesh/policy/authz"
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
	portLabel := strconv.Itoa(int(info.port))
	tls := tlsLabel(info.peer.TLS)

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
	switch {
	case err != nil:
		deny = denial(authz.ReasonNoPolicy, err.Error())
	case !serverIPsAllow(st.proto, info.target):
		deny = denial(authz.ReasonUnauthorized, "the server does not listen on the address the client used")
	default:
		res = authz.Evaluate(st.srv, info.peer, &authz.Request{Method: r.Method, Path: target, Host: r.Host, Header: r.Header})
		if res.Decision == authz.Deny {
			deny = denial(res.Reason, "")
		}
	}
	rname := routeName(&res)
	stats := p.m.http.request(Inbound, portLabel, rname, info.peer.Identity, info.peer.TLS)
	if deny != nil {
		p.m.http.authzDeny.WithLabelValues(portLabel, rname, deny.class, info.peer.Identity, tls).Inc()
		p.log.Info("inbound request denied", "port", info.port, "reason", deny.class, "peer_id", info.peer.Identity, "method", r.Method)
		writeProxyError(w, grpc, deny, true)
		stats.head(true)
		stats.done(deny.status, true)
		return
	}
	if res.Decision == authz.Audit {
		p.m.http.authzAudit.WithLabelValues(portLabel, rname, info.peer.Identity, tls).Inc()
		p.log.Info("inbound request admitted by audit policy", "port", info.port, "route", rname, "peer_id", info.peer.Identity)
	} else {
		p.m.http.authzAllow.WithLabelValues(portLabel, rname, authzName(res.Authorization), info.peer.Identity, tls).Inc()
	}
	fail := func(e *proxyErr) {
		p.m.http.errors.WithLabelValues(Inbound, portLabel, e.class).Inc()
		writeProxyError(w, grpc, e, false)
		stats.head(true)
		stats.done(e.status, true)
	}

	// The request as the application sees it: the normalized path the
	// policy decided on, no hop-by-hop or mesh headers from the client,
	// the verified client identity from this proxy.
	orig := ""
	if info.fromProxy {
		orig = r.Header.Get(headerOrigProto)
	}
	up, upgrade := h1.Upgrade(r)
	upgrade = upgrade && !info.h2
	hdr := r.Header // the request is not used again: edited in place
	if hdr == nil {
		hdr = http.Header{}
	}
	h1.RemoveHopByHop(hdr)
	h1.RemoveMeshHeaders(hdr)
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
			return p.dialApp(ctx, app.String())
		}, stats, nil, false)
		return
	}

	req := outgoingRequest(forward1xx(r.Context(), w), r, hdr, r.Body, path, rawQuery)
	var resp *http.Response
	upstreamDone := upstreamTimer(w)
	if toH2 {
		resp, err = p.http.pool.roundTrip(poolKey{addr: app}, req, func() bool { return false })
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
		case errors.As(err, &de), errors.As(err, &he):
			fail(&proxyErr{http.StatusBadGateway, grpcUnavailable, "app-unreachable", "the application is not reachable"})
		default:
			fail(&proxyErr{http.StatusBadGateway, grpcUnavailable, "app", err.Error()})
		}
		return
	}
	defer resp.Body.Close()
	failure := resp.StatusCode >= 500 || (resp.Header.Get("Grpc-Status") != "" && resp.Header.Get("Grpc-Status") != "0")
	stats.head(failure)
	trailer, err := copyResponse(w, resp, h1.RemoveMeshHeaders, nil)
	if gs := trailer.Get("Grpc-Status"); gs != "" && gs != "0" {
		failure = true
	}
	if err != nil {
		stats.done(resp.StatusCode, true)
		if errors.Is(err, errUpstreamBody) {
			abort()
		}
		return
	}
	stats.done(resp.StatusCode, failure)
}
