package dataplane

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pdst "github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/internal/h1"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/dataplane/route"
	"github.com/weftmesh/weft/mesh/dataplane/transport"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// service is the HTTP side of an outbound destination: its router (from
// the outbound policy and the profile), retry budget and backends, each
// with a request balancer. It lives as long as its destination.
type service struct {
	p      *Proxy
	target string
	label  string
	dest   *destination

	ready    chan struct{}
	polReady atomic.Bool
	proReady atomic.Bool

	router atomic.Pointer[route.Router]
	budget atomic.Pointer[retry.Budget]

	routes cowMap[string, *reqSeries] // route_* series by route name
	local  atomic.Pointer[reqSeries]  // requests the proxy answers before any endpoint

	mu       sync.Mutex
	pol      *outbound.OutboundPolicy
	prof     *pdst.DestinationProfile
	budgetOf retry.BudgetOptions
	backends map[string]*backend
	readyOne sync.Once
}

// backend is one backend of a route with its balancer.
type backend struct {
	spec    route.Backend
	dest    *destination // nil for a forward backend
	bal     *balance.Balancer[Endpoint]
	lastSet atomic.Pointer[endpointSet]
	mu      sync.Mutex
	series  cowMap[string, *reqSeries] // endpoint series by balancer key
}

// maxBackends bounds the backends a service keeps.
const maxBackends = 64

// serviceFor returns the HTTP state of d, creating it on first use and
// waiting up to the resolve timeout for its first policy and profile.
func (p *Proxy) serviceFor(ctx context.Context, d *destination) *service {
	d.svcMu.Lock()
	s := d.svc
	if s == nil {
		s = &service{
			p: p, target: d.target, dest: d,
			label:    p.m.http.targets.admit(d.target),
			ready:    make(chan struct{}),
			backends: map[string]*backend{},
		}
		s.router.Store(route.Default(d.target))
		s.budgetOf = retry.DefaultBudget()
		s.budget.Store(retry.NewBudget(s.budgetOf))
		d.svc = s
		s.start(d.ctx)
	}
	d.svcMu.Unlock()
	select {
	case <-s.ready:
	default:
		t := time.NewTimer(p.cfg.ResolveTimeout)
		defer t.Stop()
		select {
		case <-s.ready:
		case <-t.C:
			p.log.Info("no outbound policy or profile in time, routing by default", "target", d.target)
		case <-ctx.Done():
		}
	}
	return s
}

func (s *service) start(ctx context.Context) {
	p := s.p
	if p.outPolicies == nil {
		s.polReady.Store(true)
	} else {
		go watchSource(ctx, p, "outbound policy", s.target, p.outPolicies.Watch, func(v *outbound.OutboundPolicy, found bool) {
			s.mu.Lock()
			s.pol = v
			s.mu.Unlock()
			s.polReady.Store(true)
			s.rebuild()
		})
	}
	if p.profiles == nil {
		s.proReady.Store(true)
	} else {
		go watchSource(ctx, p, "profile", s.target, p.profiles.Watch, func(v *pdst.DestinationProfile, found bool) {
			s.mu.Lock()
			s.prof = v
			s.mu.Unlock()
			s.proReady.Store(true)
			s.rebuild()
		})
	}
	s.checkReady()
	context.AfterFunc(ctx, s.releaseBackends)
}

func (s *service) checkReady() {
	if s.polReady.Load() && s.proReady.Load() {
		s.readyOne.Do(func() { close(s.ready) })
	}
}

// rebuild compiles the router from the latest policy and profile. A
// policy the router cannot read is not applied: the last good router
// stays.
func (s *service) rebuild() {
	s.mu.Lock()
	pol, prof := s.pol, s.prof
	s.mu.Unlock()
	r, err := route.Compile(pol, prof, s.target)
	if err != nil {
		s.p.log.Warn("outbound policy refused, keeping the last one", "target", s.target, "err", err)
		s.checkReady()
		return
	}
	s.router.Store(r)
	s.mu.Lock()
	if !sameBudget(r.Budget, s.budgetOf) {
		s.budgetOf = r.Budget
		s.budget.Store(retry.NewBudget(r.Budget))
	}
	s.mu.Unlock()
	s.checkReady()
}

// watchSource follows a watch with the proxy's usual contract: the last
// value is kept when the stream breaks and it is asked again with
// backoff; ErrNotFound publishes nothing found (nil).
func watchSource[T any](ctx context.Context, p *Proxy, what, target string, open func(context.Context, string) (<-chan T, error), publish func(v T, found bool)) {
	backoff := 50 * time.Millisecond
	var zero T
	first := true
	for {
		ch, err := open(ctx, target)
		if err == nil {
			for v := range ch {
				publish(v, true)
				first = false
				backoff = 50 * time.Millisecond
			}
			if ctx.Err() != nil {
				return
			}
			err = errors.New("watch ended")
		} else if errors.Is(err, ErrNotFound) {
			publish(zero, false)
			first = false
			backoff = max(backoff, 5*time.Second)
		} else {
			p.log.Warn(what+" watch broken, keeping the last one", "target", target, "err", err, "retry_in", backoff)
			if first {
				// Nothing to keep: route by default rather than wait.
				publish(zero, false)
				first = false
			}
		}
		select {
		case <-time.After(jitter(backoff)):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

func backendKey(b route.Backend, acc *balance.Accrual) string {
	k := "dst:" + b.Authority
	if b.Forward != nil {
		k = fmt.Sprintf("fwd:%s|%s|%d", b.Forward.Addr, b.Forward.Identity, b.Forward.OpaqueTransportPort)
	}
	if acc != nil {
		k += fmt.Sprintf("|acc:%+v", *acc)
	}
	if b.DefaultRTT != 0 || b.Decay != 0 {
		k += fmt.Sprintf("|ewma:%s/%s", b.DefaultRTT, b.Decay)
	}
	if b.Penalty != nil {
		k += fmt.Sprintf("|penalty:%s/%s", b.Penalty.Penalty, b.Penalty.MaxRetryAfter)
	}
	return k
}

// backend returns the balancer of a route backend, resolving its
// authority the first time.
func (s *service) backend(ctx context.Context, spec route.Backend, acc *balance.Accrual) (*backend, error) {
	key := backendKey(spec, acc)
	s.mu.Lock()
	if b := s.backends[key]; b != nil {
		s.mu.Unlock()
		return b, nil
	}
	if len(s.backends) >= maxBackends {
		s.mu.Unlock()
		return nil, fmt.Errorf("dataplane: %s has more than %d backends", s.target, maxBackends)
	}
	s.mu.Unlock()

	b := &backend{spec: spec, bal: balance.New[Endpoint](balance.Options{DefaultRTT: spec.DefaultRTT, Decay: spec.Decay, Accrual: acc, Penalty: spec.Penalty, Now: s.p.now})}
	if spec.Forward != nil {
		b.bal.Update([]balance.Item[Endpoint]{{Key: key, Weight: 1, Value: Endpoint{
			Addr: spec.Forward.Addr, Identity: spec.Forward.Identity, OpaqueTransportPort: spec.Forward.OpaqueTransportPort,
		}}})
	} else if spec.Authority == s.target {
		b.dest = s.dest
	} else {
		d, err := s.p.dests.get(ctx, spec.Authority)
		if err != nil {
			return nil, err
		}
		b.dest = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other := s.backends[key]; other != nil {
		if b.dest != nil && b.dest != s.dest {
			b.dest.release()
		}
		return other, nil
	}
	s.backends[key] = b
	return b, nil
}

// releaseBackends drops the destinations the service's backends hold.
func (s *service) releaseBackends() {
	s.mu.Lock()
	bs := s.backends
	s.backends = map[string]*backend{}
	s.mu.Unlock()
	for _, b := range bs {
		if b.dest != nil && b.dest != s.dest {
			b.dest.release()
		}
	}
}

// refresh brings the balancer up to date with the destination's
// endpoints (a pointer comparison when nothing changed).
func (b *backend) refresh() {
	if b.dest == nil {
		return
	}
	set := b.dest.set.Load()
	if set == nil || b.lastSet.Load() == set {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastSet.Load() == set {
		return
	}
	items := make([]balance.Item[Endpoint], 0, len(set.eps))
	for _, e := range set.eps {
		items = append(items, balance.Item[Endpoint]{
			Key:    fmt.Sprintf("%s|%s|%d", e.Addr, e.Identity, e.OpaqueTransportPort),
			Weight: e.Weight,
			Value:  e.Endpoint,
		})
	}
	b.bal.Update(items)
	b.lastSet.Store(set)
}

func (b *backend) usable() bool {
	b.refresh()
	return b.bal.Available() > 0
}

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

func sameBudget(a, b retry.BudgetOptions) bool {
	return a.Ratio == b.Ratio && a.MinPerSecond == b.MinPerSecond && a.TTL == b.TTL
}
