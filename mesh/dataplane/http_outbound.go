package dataplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/dataplane/route"
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
	removeMeshHeaders(h)
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
	removeMeshHeaders(r.Header)
	return r.Header
}

// serveOutbound proxies one request from the local application.
func (p *Proxy) serveOutbound(w http.ResponseWriter, r *http.Request, info *connInfo) {
	svc := info.svc
	grpc := isGRPC(r)
	rawPath := escapedPath(r)
	routePath := rawPath
	if np, err := pathnorm.Normalize(rawPath); err == nil {
		routePath = np
	}
	rt := svc.router.Load().Select(route.Request{
		Method: r.Method, Path: routePath, RawQuery: r.URL.RawQuery, Host: hostOnly(r.Host),
		Header: r.Header, HTTP2: info.h2, GRPC: grpc,
	})
	var stats reqStats
	stats.begin(svc.routeSeries(rt.Name), time.Now())
	var tr *tapRequest                                // set when an open tap takes the request
	defer func() { tr.responseEnd(0, -1, -1, nil) }() // ends an upgraded or aborted request; no-op once ended
	tapped := false
	tapStart := func(ep Endpoint) {
		if !tapped && p.tap.on() {
			tapped = true
			tr = p.tapOutbound(r, info, rt.Name, &ep)
		}
	}
	fail := func(e *proxyErr) {
		p.m.http.errors.WithLabelValues(Outbound, svc.label, e.class).Inc()
		tapStart(Endpoint{})
		writeProxyError(w, grpc, e, false)
		if stats.ep == nil {
			stats.attempt(svc.localSeries())
		}
		stats.head(e.status)
		stats.done(e.status, grpcStatusOf(grpc, e), true, e.class)
		tr.responseInit(e.status, w.Header(), info.h2)
		tr.responseEnd(0, tapGRPCStatus(grpcStatusOf(grpc, e)), -1, nil)
	}

	switch {
	case r.Method == http.MethodConnect:
		fail(&proxyErr{http.StatusMethodNotAllowed, grpcUnimplemented, "connect-refused", "CONNECT is served only by the explicit CONNECT listener"})
		return
	case route.NotFound(rt):
		fail(&proxyErr{http.StatusNotFound, grpcUnimplemented, "no-route", "no route matches the request"})
		return
	case rt.Redirect != nil:
		loc := rt.Redirect.Location("http", hostOnly(r.Host), hostPort(r.Host), r.URL.Path, r.URL.RawQuery, rt.MatchedPrefix())
		w.Header().Set("Location", loc)
		w.Header().Set("Content-Length", "0")
		tapStart(Endpoint{})
		w.WriteHeader(rt.Redirect.Status)
		stats.attempt(svc.localSeries())
		stats.head(rt.Redirect.Status)
		stats.done(rt.Redirect.Status, "", false, "")
		tr.responseInit(rt.Redirect.Status, w.Header(), info.h2)
		tr.responseEnd(0, -1, -1, nil)
		return
	case rt.Fail.Hit():
		fail(faultErr(rt.Fail))
		return
	}

	ctx := r.Context()
	if rt.Timeouts.Request > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rt.Timeouts.Request)
		defer cancel()
	}
	ctx, touch, stopIdle := idleWatch(ctx, rt.Timeouts.Idle)
	defer stopIdle()

	if up, ok := h1.Upgrade(r); ok && !info.h2 {
		p.outboundUpgrade(ctx, w, r, svc, rt, up, &stats)
		return
	}

	var body io.ReadCloser = r.Body
	var cbody *clientBody
	if body != nil && body != http.NoBody {
		cbody = newClientBody(r, false)
		body = cbody
	}
	if rt.Timeouts.Idle > 0 && body != nil && body != http.NoBody {
		body = &touchReader{ReadCloser: body, touch: touch}
	}
	var rb *replayBody
	canRetry := rt.Retry != nil && (retry.Idempotent(r.Method) || rt.Retry.NonIdempotent) &&
		r.ContentLength <= rt.Retry.MaxRequestBytes
	if canRetry && body != nil && body != http.NoBody {
		rb = newReplayBody(body, rt.Retry.MaxRequestBytes)
	}
	budget := svc.budget.Load()
	budget.Deposit()
	router := svc.router.Load()

	var (
		tried    []*balance.Handle[Endpoint]
		resp     *http.Response
		perr     *proxyErr
		handle   *balance.Handle[Endpoint]
		connFail int
		retries  uint32
	)
attempts:
	for {
		bi := route.PickBackend(rt.Backends, rt.FirstAvailable, func(i int) bool {
			b, err := svc.backend(ctx, rt.Backends[i], router.Accrual)
			return err == nil && b.usable()
		})
		if bi < 0 {
			perr = &proxyErr{http.StatusInternalServerError, grpcUnavailable, "no-backends", "the route has no backends"}
			break attempts
		}
		spec := rt.Backends[bi]
		if spec.Fail.Hit() {
			perr = faultErr(spec.Fail)
			break attempts
		}
		be, err := svc.backend(ctx, spec, router.Accrual)
		if err != nil {
			perr = &proxyErr{http.StatusServiceUnavailable, grpcUnavailable, "resolve", err.Error()}
			break attempts
		}
		be.refresh()
		h, err := be.bal.PickExcept(tried)
		if errors.Is(err, balance.ErrNoEndpoints) {
			perr = &proxyErr{http.StatusServiceUnavailable, grpcUnavailable, "no-endpoints", spec.Name + " has no endpoints"}
			break attempts
		}
		if err != nil {
			perr = &proxyErr{http.StatusServiceUnavailable, grpcUnavailable, "unavailable", "every endpoint of " + spec.Name + " is failing"}
			break attempts
		}
		tried = append(tried, h)
		stats.attempt(be.seriesFor(svc, h))
		tapStart(h.Value())

		attemptBody := body
		if rb != nil {
			attemptBody = rb.attempt()
		}
		// Without header filters or retries the client's header is cleaned
		// in place (which repeating for another endpoint leaves unchanged);
		// otherwise each attempt starts from a copy.
		var hdr http.Header
		if rt.Retry == nil && rt.RequestHeaders == nil && spec.RequestHeaders == nil {
			hdr = cleanInPlace(r)
		} else {
			hdr = outboundHeader(r, rt.RequestHeaders, spec.RequestHeaders)
		}
		headTimeout := rt.Timeouts.Response
		if rt.Retry != nil && rt.Retry.Timeout > 0 {
			headTimeout = rt.Retry.Timeout
		}
		actx, acancel := ctx, context.CancelFunc(func() {})
		if headTimeout > 0 || rt.Retry != nil {
			actx, acancel = context.WithCancel(ctx)
		}
		var timedOut atomic.Bool
		var timer *time.Timer
		if headTimeout > 0 {
			timer = time.AfterFunc(headTimeout, func() { timedOut.Store(true); acancel() })
		}
		req := outgoingRequest(forward1xx(actx, w), r, hdr, attemptBody, rawPath, r.URL.RawQuery)
		resp, err = p.roundTrip(req, h.Value(), info.h2, svc.target, func() bool { return rb == nil || rb.replayable() })
		if timer != nil {
			timer.Stop()
		}
		if err != nil {
			acancel()
			var de *dialError
			if errors.As(err, &de) && connFail < maxDialAttempts-1 && (rb == nil || rb.replayable()) && ctx.Err() == nil {
				h.Done(false)
				stats.attemptEnded(0, "", true, "connect")
				connFail++
				p.log.Debug("endpoint unreachable, trying another", "target", svc.target, "endpoint", h.Key(), "err", err)
				continue attempts
			}
			reason := "error"
			switch {
			case r.Context().Err() != nil:
				perr = &proxyErr{499, grpcUnavailable, "client-gone", "the client went away"}
			case cbody.failed() != nil:
				perr = bodyFailure(cbody.failed())
			case errors.Is(context.Cause(ctx), errIdleTimeout):
				perr = &proxyErr{http.StatusGatewayTimeout, grpcDeadlineExceeded, "idle-timeout", "nothing moved within " + rt.Timeouts.Idle.String()}
			case ctx.Err() != nil:
				perr = &proxyErr{http.StatusGatewayTimeout, grpcDeadlineExceeded, "request-timeout", "the request timed out"}
			case timedOut.Load():
				reason = "timeout"
				perr = &proxyErr{http.StatusGatewayTimeout, grpcDeadlineExceeded, "response-timeout", "no response within " + headTimeout.String()}
			case de != nil:
				perr = &proxyErr{http.StatusServiceUnavailable, grpcUnavailable, "connect", err.Error()}
			default:
				perr = &proxyErr{http.StatusBadGateway, grpcUnavailable, "upstream", err.Error()}
			}
			endpointFault := perr.class != "client-gone" && perr.class != "request-timeout" && perr.class != "idle-timeout" &&
				perr.class != classRequestBody
			h.Done(!endpointFault)
			if endpointFault && p.mayRetry(rt, r, rb, retries, budget, svc, reason, &stats) {
				retries++
				stats.attemptEnded(0, "", true, perr.class)
				perr = nil
				if !sleepBackoff(ctx, rt.Retry, retries, 0, false) {
					perr = &proxyErr{http.StatusGatewayTimeout, grpcDeadlineExceeded, "request-timeout", "the request timed out"}
					break attempts
				}
				continue attempts
			}
			break attempts
		}
		failure := route.Failure(rt.Classes, resp.StatusCode, resp.Header.Get("Grpc-Status"))
		outcome := responseOutcome(resp, failure, p.now())
		h.DoneWith(outcome)
		if rt.Retry != nil && retryableResponse(rt.Retry, resp, failure) && p.mayRetry(rt, r, rb, retries, budget, svc, "status", &stats) {
			retries++
			stats.attemptEnded(resp.StatusCode, resp.Header.Get("Grpc-Status"), failure, "")
			resp.Body.Close()
			acancel()
			if !sleepBackoff(ctx, rt.Retry, retries, outcome.RetryAfter, outcome.HasRetryAfter) {
				perr = &proxyErr{http.StatusGatewayTimeout, grpcDeadlineExceeded, "request-timeout", "the request timed out"}
				break attempts
			}
			continue attempts
		}
		defer acancel()
		handle = h
		break attempts
	}
	if rb != nil {
		defer rb.close()
	}
	if perr != nil {
		fail(perr)
		return
	}
	defer resp.Body.Close()
	gs := resp.Header.Get("Grpc-Status")
	failure := route.Failure(rt.Classes, resp.StatusCode, gs)
	stats.head(resp.StatusCode)
	tr.responseInit(resp.StatusCode, resp.Header, info.h2)
	meshed := handle.Value().Identity != ""
	trailer, n, err := copyResponse(w, resp, func(h http.Header) {
		cleanResponseHeader(h, meshed)
		rt.ResponseHeaders.Apply(h)
	}, touch)
	if tgs := trailer.Get("Grpc-Status"); tgs != "" {
		gs = tgs
		failure = route.Failure(rt.Classes, resp.StatusCode, gs)
	}
	if err != nil {
		stats.done(resp.StatusCode, gs, true, streamErrorClass(err))
		tr.responseEnd(n, -1, tapResetCode(err), nil)
		if errors.Is(err, errUpstreamBody) {
			abort()
		}
		return
	}
	stats.done(resp.StatusCode, gs, failure, "")
	tr.responseEnd(n, tapGRPCStatus(gs), -1, trailer)
}

// faultErr is the answer of a failure injector: its HTTP status, or its
// gRPC code (UNAVAILABLE for an HTTP injector that hits a gRPC call).
func faultErr(f *route.Fault) *proxyErr {
	status, code := f.Status, int(f.GRPCCode)
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if !f.GRPC {
		code = grpcUnavailable
	}
	return &proxyErr{status, code, "fault-injected", f.Message}
}

// cleanResponseHeader removes mesh headers from a response; from a peer
// proxy the two that explain its own answers are kept.
func cleanResponseHeader(h http.Header, fromPeerProxy bool) {
	var perr, deny []string
	if fromPeerProxy {
		perr, deny = h[headerProxyError], h[headerDenyReason]
	}
	removeMeshHeaders(h)
	if len(perr) > 0 {
		h[headerProxyError] = perr
	}
	if len(deny) > 0 {
		h[headerDenyReason] = deny
	}
}

// retryableResponse reports whether a response matches the retry
// conditions (status ranges, gRPC codes in a trailers-only response, or
// the profile's failure class).
func retryableResponse(rp *route.Retry, resp *http.Response, failure bool) bool {
	if rp.RetryableStatus(resp.StatusCode) {
		return true
	}
	if gs := resp.Header.Get("Grpc-Status"); gs != "" && len(rp.GRPCCodes) > 0 {
		if n, err := strconv.ParseUint(gs, 10, 32); err == nil && rp.GRPCCodes[uint32(n)] {
			return true
		}
	}
	return rp.OnFailureClass && failure
}

// mayRetry applies the retry rules: a route retry policy, an idempotent
// method (or one the route explicitly covers), a body small enough to
// replay, retries left, and the destination's budget.
func (p *Proxy) mayRetry(rt *route.Route, r *http.Request, rb *replayBody, done uint32, budget *retry.Budget, svc *service, reason string, stats *reqStats) bool {
	rp := rt.Retry
	if rp == nil || done >= rp.MaxRetries {
		return false
	}
	if !retry.Idempotent(r.Method) && !rp.NonIdempotent {
		return false
	}
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	if hasBody && (rb == nil || !rb.replayable()) {
		return false
	}
	if !budget.Withdraw() {
		p.m.http.exhausted.WithLabelValues(svc.label, rt.Name).Inc()
		stats.retryable(false)
		return false
	}
	p.m.http.retries.WithLabelValues(svc.label, rt.Name, reason).Inc()
	stats.retryable(true)
	return true
}

// sleepBackoff waits before retry number n (the server's hint, when the
// route respects it); false when ctx ended first.
func sleepBackoff(ctx context.Context, rp *route.Retry, n uint32, hint time.Duration, hasHint bool) bool {
	d := retry.Backoff{Min: rp.MinBackoff, Max: rp.MaxBackoff, Jitter: rp.Jitter, RespectRetryAfter: rp.RespectRetryAfter}.Delay(n, hint, hasHint, nil)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// roundTrip sends a request to one endpoint: over the pooled HTTP/2
// connection to its proxy when it is meshed (an HTTP/1 request carries
// its version in l5d-orig-proto), over h2c when the client spoke HTTP/2,
// and over HTTP/1 otherwise.
func (p *Proxy) roundTrip(req *http.Request, ep Endpoint, clientH2 bool, target string, replayable func() bool) (*http.Response, error) {
	if ep.Identity != "" {
		if !clientH2 {
			req.Header[headerOrigProto] = []string{"HTTP/1.1"}
		}
		dial := ep.Addr
		if ep.OpaqueTransportPort != 0 {
			dial = netip.AddrPortFrom(ep.Addr.Addr(), ep.OpaqueTransportPort)
		}
		return p.http.pool.roundTrip(poolKey{addr: dial, identity: ep.Identity, port: ep.Addr.Port()}, req, replayable, dialLabels{ep: ep})
	}
	if clientH2 {
		return p.http.pool.roundTrip(poolKey{addr: ep.Addr}, req, replayable, dialLabels{ep: ep})
	}
	resp, err := p.http.extH1.RoundTrip(req, ep.Addr.String())
	var de *h1.DialError
	if errors.As(err, &de) {
		return nil, &dialError{err}
	}
	return resp, err
}

func sameBudget(a, b retry.BudgetOptions) bool {
	return a.Ratio == b.Ratio && a.MinPerSecond == b.MinPerSecond && a.TTL == b.TTL
}
