package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/endpoint"
	"github.com/weftmesh/weft/mesh/dataplane/internal/httpcore"
	"github.com/weftmesh/weft/mesh/dataplane/internal/reqmetrics"
	"github.com/weftmesh/weft/mesh/dataplane/internal/tap"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/dataplane/route"
)

// outboundCall is one request from the local application, with what its
// attempts share: the route it took, its deadline, its body (replayable
// when it may be retried), the unreachable endpoints skipped and the
// retries spent, its metrics and its tap.
type outboundCall struct {
	h       *HTTP
	w       http.ResponseWriter
	r       *http.Request
	conn    *httpcore.Conn
	svc     Service
	st      httpcore.FrameStream // instead of w and r on the frame path (ServeFrames)
	router  *route.Router
	rt      *route.Route
	grpc    bool
	rawPath string

	// The request as both paths read it.
	method        string
	reqCtx        context.Context // the client's
	contentLength int64           // -1 when unknown
	hasBody       bool
	fields        []hpack.HeaderField // frame path: the client's fields without mesh fields, once the first attempt cleaned them

	ctx           context.Context // the request's, bounded by the route's request and idle timeouts
	touch         func()          // postpones the idle timeout
	stopIdle      func()
	cancelRequest context.CancelFunc // nil without a request timeout

	body  io.ReadCloser        // the client's body as attempts read it (nil or http.NoBody without one)
	cbody *httpcore.ClientBody // keeps the body's first read error
	rb    *ReplayBody          // set when the request may be retried and has a body

	budget    *retry.Budget
	dialFails int
	retries   uint32

	stats  reqmetrics.Stats
	tr     *tap.Request // set when an open tap took the request
	tapped bool
}

// tapStart offers the request to the open taps once, with the endpoint
// of h it is sent to (zero without one, when the proxy answers itself).
// Nothing is allocated unless a tap takes the request.
func (c *outboundCall) tapStart(h *balance.Handle[endpoint.Endpoint]) {
	if c.tapped || !c.h.Tap.On() {
		return
	}
	c.tapped = true
	var ep endpoint.Endpoint
	if h != nil {
		ep = h.Value()
	}
	r := c.r
	if c.st != nil {
		// The client's fields, or once an attempt cleaned them in place
		// what is left of them (as the http path's header is then).
		fields := c.fields
		if fields == nil {
			fields = c.st.Fields()
		}
		r = httpcore.FrameRequest(c.st, fields)
	}
	c.tr = c.h.tapOutbound(r, c.conn, c.rt.Name, ep)
}

// fail answers the request for the proxy, for the reason err gives
// (outboundAnswer), and records it.
func (c *outboundCall) fail(err error) {
	e := outboundAnswer(err)
	c.h.Metrics.Errors.WithLabelValues(direction, c.svc.Names().Label, e.Class).Inc()
	c.tapStart(nil)
	var answer http.Header
	if c.st != nil {
		answer = c.answerFrames(&e)
	} else {
		httpcore.WriteAnswer(c.w, c.grpc, &e, false)
		answer = c.w.Header()
	}
	if !c.stats.Attempting() {
		c.stats.Attempt(c.svc.LocalSeries())
	}
	gs := httpcore.GRPCStatusOf(c.grpc, &e)
	c.stats.Head(e.Status)
	c.stats.Done(e.Status, gs, true, e.Class)
	c.tr.ResponseInit(e.Status, answer, c.conn.H2)
	tap.End(&c.tr, 0, tap.GRPCStatus(gs), -1, nil)
}

// prepareBody wraps the client's body: it keeps its first read error,
// postpones the idle timeout as it moves, and is kept for replay when
// the route may retry the request.
func (c *outboundCall) prepareBody() {
	rt := c.rt
	switch {
	case c.st != nil:
		c.cbody = &httpcore.ClientBody{ReadCloser: c.st.Body()}
		c.body = c.cbody
	case c.r.Body != nil && c.r.Body != http.NoBody:
		c.cbody = httpcore.NewClientBody(c.r, false)
		c.body = c.cbody
	default:
		c.body = c.r.Body
	}
	if c.cbody != nil && rt.Timeouts.Idle > 0 {
		c.body = &touchReader{ReadCloser: c.body, touch: c.touch}
	}
	canRetry := rt.Retry != nil && (retry.Idempotent(c.method) || rt.Retry.NonIdempotent) &&
		c.contentLength <= rt.Retry.MaxRequestBytes
	if canRetry && c.cbody != nil {
		c.rb = newReplayBody(c.body, rt.Retry.MaxRequestBytes)
	}
	c.budget = c.svc.Budget()
	c.budget.Deposit()
}

// run sends the request until an attempt ends in a response that is not
// retried, which a holds when run returns nil, or in an error that is not.
func (c *outboundCall) run(a *outboundAttempt) error {
	// The endpoints tried so far, avoided while others are available;
	// local, so that its few entries stay on the stack.
	var tried []*balance.Handle[endpoint.Endpoint]
	for {
		if err := a.pick(c, tried); err != nil {
			return err
		}
		tried = append(tried, a.h)
		if err := a.send(c); err != nil {
			again, err := c.afterError(a, err)
			if !again {
				return err
			}
			continue
		}
		again, err := c.afterResponse(a)
		if !again {
			return err
		}
	}
}

// afterError decides what follows an attempt that got no response: try
// another endpoint (an unreachable one, not counted as a retry), retry
// within the budget, or give up with the error to answer.
func (c *outboundCall) afterError(a *outboundAttempt, err error) (bool, error) {
	a.cancel()
	if a.redial(c, err) {
		return true, nil
	}
	cause := a.cause(c, err)
	class := outboundAnswer(cause).Class
	fault := endpointFault(class)
	a.h.Done(!fault)
	if !fault {
		return false, cause
	}
	reason := "error"
	if to := (*timeoutError)(nil); errors.As(cause, &to) && !to.idle {
		reason = "timeout"
	}
	if !c.mayRetry(reason) {
		return false, cause
	}
	c.stats.AttemptEnded(0, "", true, class)
	return c.backoff(0, false)
}

// afterResponse classifies an attempt's response for failure accrual and
// decides whether it is the answer or is retried.
func (c *outboundCall) afterResponse(a *outboundAttempt) (bool, error) {
	status, gs := a.status, a.gs
	failure := route.Failure(c.rt.Classes, status, gs)
	var hints http.Header
	if a.resp != nil {
		hints = a.resp.Header
	} else {
		hints = hintFields(a.fresp.Fields)
	}
	outcome := responseOutcome(status, gs, hints, failure, c.h.Now())
	a.h.DoneWith(outcome)
	if c.rt.Retry == nil || !retryableResponse(c.rt.Retry, status, gs, failure) || !c.mayRetry("status") {
		return false, nil
	}
	c.stats.AttemptEnded(status, gs, failure, "")
	a.closeResponse()
	a.cancel()
	return c.backoff(outcome.RetryAfter, outcome.HasRetryAfter)
}

// mayRetry applies the retry rules: a route retry policy, an idempotent
// method (or one the route explicitly covers), a body small enough to
// replay, retries left, and the destination's budget. It counts the retry
// it allows.
func (c *outboundCall) mayRetry(reason string) bool {
	rt := c.rt
	rp := rt.Retry
	if rp == nil || c.retries >= rp.MaxRetries {
		return false
	}
	if !retry.Idempotent(c.method) && !rp.NonIdempotent {
		return false
	}
	if c.hasBody && !c.rb.Replayable() {
		return false
	}
	if !c.budget.Withdraw() {
		c.h.Metrics.Exhausted.WithLabelValues(c.svc.Names().Label, rt.Name).Inc()
		c.stats.Retryable(false)
		return false
	}
	c.h.Metrics.Retries.WithLabelValues(c.svc.Names().Label, rt.Name, reason).Inc()
	c.stats.Retryable(true)
	c.retries++
	return true
}

// backoff waits before the next retry (the server's hint, when the route
// respects it); the request's deadline ending first is its answer.
func (c *outboundCall) backoff(hint time.Duration, hasHint bool) (bool, error) {
	rp := c.rt.Retry
	d := retry.Backoff{Min: rp.MinBackoff, Max: rp.MaxBackoff, Jitter: rp.Jitter, RespectRetryAfter: rp.RespectRetryAfter}.Delay(c.retries, hint, hasHint, nil)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-c.ctx.Done():
		return false, errRequestTimeout
	}
}

// outboundAttempt is one try of an outbound request: the backend and the
// endpoint picked for it (with the balancer's handle, which learns how
// the try went), the response it got, and the context and timer bounding
// its wait for the response head. Its steps take the call they belong to
// (not kept in the attempt, so that the call can stay on the stack).
type outboundAttempt struct {
	backend  *route.Backend
	h        *balance.Handle[endpoint.Endpoint]
	ctx      context.Context
	cancel   context.CancelFunc     // ends the attempt's exchange (a no-op when it has no context of its own)
	timeout  time.Duration          // for the response head, 0 for none
	timedOut *atomic.Bool           // set when timeout ran out
	resp     *http.Response         // the http path's response
	fresp    httpcore.FieldResponse // the frame path's
	status   int                    // the response's status
	gs       string                 // and its grpc-status, "" without one
}

// closeResponse closes the body of a response that is not relayed.
func (a *outboundAttempt) closeResponse() {
	if a.resp != nil {
		a.resp.Body.Close()
		return
	}
	a.fresp.Body.Close()
}

// pick chooses the attempt's backend (by weight, or the first usable
// one) and, by the backend's balancer, an endpoint not tried yet while
// others are available (tried). A backend's injected fault ends the
// request here.
func (a *outboundAttempt) pick(c *outboundCall, tried []*balance.Handle[endpoint.Endpoint]) error {
	*a = outboundAttempt{}
	rt, svc, ctx, acc := c.rt, c.svc, c.ctx, c.router.Accrual
	bi := route.PickBackend(rt.Backends, rt.FirstAvailable, func(i int) bool {
		b, err := svc.Backend(ctx, rt.Backends[i], acc)
		return err == nil && b.Balancer().Available() > 0
	})
	if bi < 0 {
		return errNoBackends
	}
	a.backend = &rt.Backends[bi]
	if a.backend.Fail.Hit() {
		return &faultError{a.backend.Fail}
	}
	be, err := svc.Backend(ctx, *a.backend, acc)
	if err != nil {
		return &resolveError{err}
	}
	h, err := be.Balancer().PickExcept(tried)
	if err != nil {
		return &noEndpointError{backend: a.backend.Name, failing: !errors.Is(err, balance.ErrNoEndpoints)}
	}
	a.h = h
	c.stats.Attempt(be.Series(h))
	c.tapStart(h)
	return nil
}

// send sends the request to the picked endpoint and waits for the
// response head, within the route's response (or per-try) timeout.
func (a *outboundAttempt) send(c *outboundCall) error {
	rt := c.rt
	body := c.body
	if c.rb != nil {
		body = c.rb.attempt()
	}
	a.timeout = rt.Timeouts.Response
	if rt.Retry != nil && rt.Retry.Timeout > 0 {
		a.timeout = rt.Retry.Timeout
	}
	a.ctx, a.cancel = c.ctx, func() {}
	if a.timeout > 0 || rt.Retry != nil {
		a.ctx, a.cancel = context.WithCancel(c.ctx)
	}
	var timer *time.Timer
	if a.timeout > 0 {
		timedOut, cancel := new(atomic.Bool), a.cancel
		a.timedOut = timedOut
		timer = time.AfterFunc(a.timeout, func() { timedOut.Store(true); cancel() })
	}
	var err error
	if c.st != nil {
		err = a.sendFields(c, body)
	} else {
		err = a.sendHTTP(c, body)
	}
	if timer != nil {
		timer.Stop()
	}
	return err
}

// sendHTTP is send's exchange on the http path.
func (a *outboundAttempt) sendHTTP(c *outboundCall, body io.ReadCloser) error {
	r, rt := c.r, c.rt
	// Without header filters or retries the client's header is cleaned
	// in place (which repeating for another endpoint leaves unchanged);
	// otherwise each attempt starts from a copy.
	var hdr http.Header
	if rt.Retry == nil && rt.RequestHeaders == nil && a.backend.RequestHeaders == nil {
		hdr = cleanInPlace(r)
	} else {
		hdr = outboundHeader(r, rt.RequestHeaders, a.backend.RequestHeaders)
	}
	// A peer proxy learns which Service the request is for (its route
	// metrics; internal/meshstate's routenames.go). The client's own
	// copy went with the other mesh headers.
	if n := c.svc.Names(); n.Canonical != "" && a.h.Value().Identity != "" {
		hdr[httpcore.HeaderDstCanonical] = []string{n.Canonical}
	}
	req := httpcore.OutgoingRequest(httpcore.Forward1xx(a.ctx, c.w), r, hdr, body, c.rawPath, r.URL.RawQuery)
	resp, err := c.h.RoundTrip(req, a.h.Value(), c.conn.H2, c.conn.Remote.Addr(), c.rb)
	if resp != nil {
		a.resp, a.status, a.gs = resp, resp.StatusCode, resp.Header.Get("Grpc-Status")
	}
	return err
}

// redial reports whether an attempt whose endpoint could not be reached
// is tried again on another endpoint: up to MaxDialAttempts per request,
// while the body can be sent again and the request has time left. The
// endpoint is marked failed; the try is no retry and spends no budget.
func (a *outboundAttempt) redial(c *outboundCall, err error) bool {
	var de *httpcore.DialError
	if !errors.As(err, &de) || c.dialFails >= MaxDialAttempts-1 || !c.rb.Replayable() || c.ctx.Err() != nil {
		return false
	}
	a.h.Done(false)
	c.stats.AttemptEnded(0, "", true, "connect")
	c.dialFails++
	c.h.Log.Debug("endpoint unreachable, trying another", "target", c.svc.Names().Target, "endpoint", a.h.Key(), "err", err)
	return true
}

// cause names why the attempt got no response, for outboundAnswer: the
// client went away or its body failed, the request's idle or overall
// deadline passed, the wait for the head timed out, or the exchange's
// own error (a dial error or anything else from upstream).
func (a *outboundAttempt) cause(c *outboundCall, err error) error {
	switch {
	case c.reqCtx.Err() != nil:
		return httpcore.ErrClientGone
	case c.cbody.Failed() != nil:
		return &httpcore.RequestBodyError{Err: c.cbody.Failed()}
	case errors.Is(context.Cause(c.ctx), errIdleTimeout):
		return &timeoutError{after: c.rt.Timeouts.Idle, idle: true}
	case c.ctx.Err() != nil:
		return errRequestTimeout
	case a.timedOut != nil && a.timedOut.Load():
		return &timeoutError{after: a.timeout}
	}
	return err
}
