package route

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
	"github.com/weftmesh/weft/mesh/internal/routematch"
)

// Request is what routing reads from a request.
type Request struct {
	Method string
	// Path is the request path without the query.
	Path string
	// RawQuery is the query without "?".
	RawQuery string
	// Host is the authority without the port.
	Host   string
	Header http.Header
	// HTTP2 is true when the client spoke HTTP/2 (routes of the HTTP/2
	// set apply under protocol detection).
	HTTP2 bool
	// GRPC is true for gRPC calls (content-type application/grpc).
	GRPC bool
}

// Route is the outcome of Select: everything the proxy needs to forward
// one request. It is shared and must not be modified.
type Route struct {
	// Name labels metrics: DefaultName, the route's resource
	// ("httproute/ns/name") or the profile route's name.
	Name string
	// Backends to spread the request over. Empty means the request fails
	// (500). FirstAvailable picks the first backend with a usable endpoint
	// instead of a weighted random one.
	Backends       []Backend
	FirstAvailable bool
	// Filters of the matched rule.
	RequestHeaders  *HeaderModifier
	ResponseHeaders *HeaderModifier
	Redirect        *Redirect
	Fail            *Fault
	Timeouts        Timeouts
	Retry           *Retry
	// Classes classify responses (profile response classes); nil means
	// 5xx, or a non-zero grpc-status, is a failure.
	Classes []ResponseClass
	// matchedPrefix is the path prefix that matched, for prefix redirects.
	matchedPrefix string
}

// MatchedPrefix returns the path prefix the request matched, if the route
// matched by prefix.
func (r *Route) MatchedPrefix() string { return r.matchedPrefix }

// Backend is where a request may go.
type Backend struct {
	// Name identifies the backend for metrics and caches.
	Name   string
	Weight uint32
	// Authority is resolved through discovery (a balancer); empty when
	// Forward is set.
	Authority string
	// Forward is a single endpoint given directly.
	Forward *Endpoint
	// DefaultRTT and Decay tune peak EWMA (zero: defaults).
	DefaultRTT, Decay time.Duration
	// Penalty, when set, makes the estimate penalised peak EWMA
	// (BalanceP2c.penalty_peak_ewma).
	Penalty *balance.Penalty
	// Filters applied for this backend only.
	RequestHeaders *HeaderModifier
	Fail           *Fault
}

// Endpoint is a forward backend's address and identity.
type Endpoint struct {
	Addr                netip.AddrPort
	Identity            string
	OpaqueTransportPort uint16
}

// HeaderModifier edits headers: add, then set, then remove.
type HeaderModifier struct {
	Add, Set http.Header
	Remove   []string
}

// Apply edits h.
func (m *HeaderModifier) Apply(h http.Header) {
	if m == nil {
		return
	}
	for k, vs := range m.Add {
		h[k] = append(h[k], vs...)
	}
	for k, vs := range m.Set {
		h[k] = append([]string(nil), vs...)
	}
	for _, k := range m.Remove {
		delete(h, k)
	}
}

// Redirect answers with a redirect built from the request.
type Redirect struct {
	Scheme     string // empty: the request's
	Host       string // empty: the request's
	FullPath   string // replaces the path when set
	PrefixPath *string
	Port       uint32
	Status     int
}

// Location builds the Location of a redirect for a request to
// scheme://host:port/path?query, where matchedPrefix is what the route
// matched.
func (r *Redirect) Location(scheme, host string, port uint32, path, rawQuery, matchedPrefix string) string {
	if r.Scheme != "" {
		scheme = r.Scheme
	}
	if r.Host != "" {
		host = r.Host
	}
	switch {
	case r.Port != 0:
		port = r.Port
	case r.Scheme != "":
		port = 0 // the new scheme's own port
	}
	switch {
	case r.FullPath != "":
		path = r.FullPath
	case r.PrefixPath != nil && matchedPrefix != "":
		rest := strings.TrimPrefix(path, strings.TrimSuffix(matchedPrefix, "/"))
		p := strings.TrimSuffix(*r.PrefixPath, "/")
		path = p + rest
		if path == "" {
			path = "/"
		}
	}
	u := url.URL{Scheme: scheme, Host: host, Path: path, RawQuery: rawQuery}
	if port != 0 && !(scheme == "http" && port == 80) && !(scheme == "https" && port == 443) {
		u.Host = fmt.Sprintf("%s:%d", host, port)
	}
	return u.String()
}

// Fault answers a share of requests with an error.
type Fault struct {
	// Status for HTTP, or GRPCCode (with GRPC set) for gRPC.
	Status   int
	GRPC     bool
	GRPCCode uint32
	Message  string
	// Numerator/Denominator is the share of requests that fail.
	Numerator, Denominator uint32
}

// Hit decides whether this request fails.
func (f *Fault) Hit() bool {
	if f == nil {
		return false
	}
	if f.Denominator == 0 {
		return true
	}
	return rand.Uint32N(f.Denominator) < f.Numerator
}

// Timeouts bound an exchange; zero means none.
type Timeouts struct {
	// Request bounds the whole exchange, retries included.
	Request time.Duration
	// Response bounds the wait for the response head of each attempt
	// after the request started.
	Response time.Duration
	// Idle bounds a stream with no bytes moving either way.
	Idle time.Duration
}

// Retry says which failed responses may be tried again.
type Retry struct {
	MaxRetries uint32
	// MaxRequestBytes bounds the body that may be replayed (at most
	// retry.MaxBufferedBody).
	MaxRequestBytes int64
	// Statuses are inclusive HTTP status ranges to retry.
	Statuses [][2]int
	// GRPCCodes are grpc-status codes to retry.
	GRPCCodes map[uint32]bool
	// OnFailureClass retries responses the route classifies as failures
	// (ServiceProfile isRetryable).
	OnFailureClass bool
	// Timeout bounds each attempt's wait for a response head.
	Timeout time.Duration
	// Backoff between attempts.
	MinBackoff, MaxBackoff time.Duration
	Jitter                 float64
	// RespectRetryAfter makes the response's Retry-After (or gRPC
	// pushback) hint the wait before the retry, within the backoff's
	// bounds (ExponentialBackoff.respect_retry_after_hint).
	RespectRetryAfter bool
	// NonIdempotent allows retrying methods such as POST: set when the
	// configuration explicitly covers them (see the package doc).
	NonIdempotent bool
}

// RetryableStatus reports whether an HTTP status may be retried.
func (r *Retry) RetryableStatus(code int) bool {
	for _, s := range r.Statuses {
		if code >= s[0] && code <= s[1] {
			return true
		}
	}
	return false
}

// ResponseClass classifies a response by status.
type ResponseClass struct {
	match   responseMatch
	Failure bool
}

// Failure reports whether a response is a failure under classes (the
// first class that matches decides; without one, 5xx fail). A gRPC
// response fails when its grpc-status is not 0.
func Failure(classes []ResponseClass, status int, grpcStatus string) bool {
	for _, c := range classes {
		if c.match(status) {
			return c.Failure
		}
	}
	if grpcStatus != "" && grpcStatus != "0" {
		return true
	}
	return status >= 500
}

type responseMatch func(status int) bool

// Router routes the requests to one destination.
type Router struct {
	// Opaque is true when the policy says the destination is not HTTP.
	Opaque bool
	// Accrual is the failure accrual of the destination's balancers
	// (nil: none).
	Accrual *balance.Accrual
	// Budget is the retry budget of the destination.
	Budget retry.BudgetOptions

	target  string
	profile []profileRoute
	prof    bool
	split   []Backend
	h1, h2  []httpRoute
	grpc    []grpcRoute
	isGRPC  bool
	def     *Route
}

// DefaultName is the Name of the route of requests no route resource or
// profile route named: a destination without routes, a profile's
// unmatched requests, and the policy's built-in routes.
const DefaultName = "default"

// Default returns a router that sends everything to target.
func Default(target string) *Router {
	r := &Router{target: target, Budget: retry.DefaultBudget()}
	r.def = &Route{Name: DefaultName, Backends: []Backend{{Name: target, Weight: 1, Authority: target}}}
	return r
}

// compiledRoute is an HTTP or gRPC route from the outbound policy, ready
// for matching.
type compiledRoute[Rule any] struct {
	name  string
	hosts []routematch.Host
	rules []Rule
}

type httpRoute = compiledRoute[httpRule]

type httpRule struct {
	matches []routematch.HTTP
	route   *Route
}

type grpcRoute = compiledRoute[grpcRule]

type grpcRule struct {
	matches []routematch.GRPC
	route   *Route
}

type profileRoute struct {
	name  string
	match requestMatch
	route *Route
}

type requestMatch func(method, path string) bool
