package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/weftmesh/weft/apis/proxy/destination"
	"github.com/weftmesh/weft/apis/proxy/httproute"
	"github.com/weftmesh/weft/apis/proxy/httptypes"
	"github.com/weftmesh/weft/apis/proxy/meta"
	pnet "github.com/weftmesh/weft/apis/proxy/net"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/mesh/dataplane/balance"
	"github.com/weftmesh/weft/mesh/dataplane/retry"
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
	// Name labels metrics: "default", the route's resource
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

// Default returns a router that sends everything to target.
func Default(target string) *Router {
	r := &Router{target: target, Budget: retry.DefaultBudget()}
	r.def = &Route{Name: "default", Backends: []Backend{{Name: target, Weight: 1, Authority: target}}}
	return r
}

// compiledRoute is an HTTP or gRPC route from the outbound policy, ready
// for matching.
type compiledRoute[Rule any] struct {
	name  string
	hosts []hostMatch
	rules []Rule
}

type httpRoute = compiledRoute[httpRule]

type httpRule struct {
	matches []httpMatch
	route   *Route
}

type httpMatch struct {
	path    pathMatch
	method  string
	headers []valueMatch
	query   []valueMatch
}

type pathMatch struct {
	kind  uint8 // 0 none, 1 regex, 2 prefix, 3 exact
	value string
	re    *regexp.Regexp
}

type valueMatch struct {
	name  string
	exact string
	re    *regexp.Regexp
}

type hostMatch struct {
	value  string
	suffix bool
}

type grpcRoute = compiledRoute[grpcRule]

type grpcRule struct {
	matches []grpcMatch
	route   *Route
}

type grpcMatch struct {
	service, method string
	headers         []valueMatch
}

type profileRoute struct {
	name  string
	match requestMatch
	route *Route
}

type requestMatch func(method, path string) bool

// Compile builds the router of target from its outbound policy and its
// profile; either may be nil.
func Compile(pol *outbound.OutboundPolicy, prof *destination.DestinationProfile, target string) (*Router, error) {
	r := Default(target)
	if pol != nil {
		if err := r.compilePolicy(pol); err != nil {
			return nil, fmt.Errorf("route: outbound policy for %s: %w", target, err)
		}
	}
	if prof != nil {
		if err := r.compileProfile(prof); err != nil {
			return nil, fmt.Errorf("route: profile for %s: %w", target, err)
		}
	}
	return r, nil
}

func (r *Router) compilePolicy(pol *outbound.OutboundPolicy) error {
	p := pol.GetProtocol()
	if p == nil {
		return nil
	}
	var err error
	switch k := p.GetKind().(type) {
	case *outbound.ProxyProtocol_Detect_:
		if r.h1, err = compileRoutes(k.Detect.GetHttp1().GetRoutes(), r.target, compileHTTPRule); err != nil {
			return err
		}
		if r.h2, err = compileRoutes(k.Detect.GetHttp2().GetRoutes(), r.target, compileHTTPRule); err != nil {
			return err
		}
		r.Accrual = accrualOf(k.Detect.GetHttp2().GetFailureAccrual())
		if r.Accrual == nil {
			r.Accrual = accrualOf(k.Detect.GetHttp1().GetFailureAccrual())
		}
	case *outbound.ProxyProtocol_Http1_:
		if r.h1, err = compileRoutes(k.Http1.GetRoutes(), r.target, compileHTTPRule); err != nil {
			return err
		}
		r.h2 = r.h1
		r.Accrual = accrualOf(k.Http1.GetFailureAccrual())
	case *outbound.ProxyProtocol_Http2_:
		if r.h2, err = compileRoutes(k.Http2.GetRoutes(), r.target, compileHTTPRule); err != nil {
			return err
		}
		r.h1 = r.h2
		r.Accrual = accrualOf(k.Http2.GetFailureAccrual())
	case *outbound.ProxyProtocol_Grpc_:
		if r.grpc, err = compileRoutes(k.Grpc.GetRoutes(), r.target, compileGRPCRule); err != nil {
			return err
		}
		r.isGRPC = true
		r.Accrual = accrualOf(k.Grpc.GetFailureAccrual())
	case *outbound.ProxyProtocol_Opaque_, *outbound.ProxyProtocol_Tls_:
		r.Opaque = true
	default:
		return errors.New("unknown protocol")
	}
	return nil
}

func accrualOf(fa *outbound.FailureAccrual) *balance.Accrual {
	var a balance.Accrual
	var b *outbound.ExponentialBackoff
	switch {
	case fa.GetConsecutiveFailures() != nil:
		cf := fa.GetConsecutiveFailures()
		a.MaxFailures = int(cf.GetMaxFailures())
		b = cf.GetBackoff()
	case fa.GetUnified() != nil:
		u := fa.GetUnified()
		a.Unified = true
		a.MaxFailures = int(u.GetMaxConsecutiveFailures())
		a.SuccessRate = u.GetSuccessRateThreshold()
		a.Window = u.GetDecay().AsDuration()
		a.MinRequests = int(u.GetMinRequests())
		b = u.GetBackoff()
	default:
		return nil
	}
	if b != nil {
		a.MinBackoff = b.GetMinBackoff().AsDuration()
		a.MaxBackoff = b.GetMaxBackoff().AsDuration()
		a.Jitter = float64(b.GetJitterRatio())
		a.RespectRetryAfter = b.GetRespectRetryAfterHint()
	} else {
		a.Jitter = balance.DefaultAccrual().Jitter
	}
	a.MinReady = int(fa.GetEjection().GetMinReadyEndpoints())
	return &a
}

// metaName renders route metadata as a bounded metric label.
func metaName(m *meta.Metadata, fallback string) string {
	switch k := m.GetKind().(type) {
	case *meta.Metadata_Default:
		if k.Default != "" {
			return k.Default
		}
	case *meta.Metadata_Resource:
		res := k.Resource
		if res.GetName() != "" {
			kind := strings.ToLower(res.GetKind())
			if kind == "" {
				kind = "route"
			}
			if res.GetNamespace() != "" {
				return kind + "/" + res.GetNamespace() + "/" + res.GetName()
			}
			return kind + "/" + res.GetName()
		}
	}
	return fallback
}

// routeMessage is what HttpRoute and GrpcRoute of the outbound API share.
type routeMessage[R any] interface {
	GetMetadata() *meta.Metadata
	GetHosts() []*httproute.HostMatch
	GetRules() []R
}

// compileRoutes compiles the routes of one protocol: names (defaulted by
// position), host matches, and each rule through compileRule.
func compileRoutes[M routeMessage[R], R, Rule any](prs []M, target string, compileRule func(R, string, string) (Rule, error)) ([]compiledRoute[Rule], error) {
	var out []compiledRoute[Rule]
	for i, pr := range prs {
		name := metaName(pr.GetMetadata(), fmt.Sprintf("route-%d", i))
		rt := compiledRoute[Rule]{name: name}
		hosts, err := compileHosts(pr.GetHosts())
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", name, err)
		}
		rt.hosts = hosts
		if len(pr.GetRules()) == 0 {
			return nil, fmt.Errorf("route %s: no rules", name)
		}
		for j, prr := range pr.GetRules() {
			rule, err := compileRule(prr, name, target)
			if err != nil {
				return nil, fmt.Errorf("route %s: rule %d: %w", name, j, err)
			}
			rt.rules = append(rt.rules, rule)
		}
		out = append(out, rt)
	}
	return out, nil
}

func compileHTTPRule(prr *outbound.HttpRoute_Rule, name, target string) (httpRule, error) {
	var rule httpRule
	allMethods := len(prr.GetMatches()) > 0
	for _, pm := range prr.GetMatches() {
		m, err := compileHTTPMatch(pm)
		if err != nil {
			return rule, err
		}
		allMethods = allMethods && m.method != ""
		rule.matches = append(rule.matches, m)
	}
	rt := &Route{Name: name}
	for _, f := range prr.GetFilters() {
		switch k := f.GetKind().(type) {
		case *outbound.HttpRoute_Filter_RequestHeaderModifier:
			m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
			if err != nil {
				return rule, err
			}
			rt.RequestHeaders = m
		case *outbound.HttpRoute_Filter_ResponseHeaderModifier:
			m, err := headerModifier(k.ResponseHeaderModifier.GetAdd(), k.ResponseHeaderModifier.GetSet(), k.ResponseHeaderModifier.GetRemove())
			if err != nil {
				return rule, err
			}
			rt.ResponseHeaders = m
		case *outbound.HttpRoute_Filter_Redirect:
			rd, err := redirectOf(k.Redirect)
			if err != nil {
				return rule, err
			}
			rt.Redirect = rd
		case *outbound.HttpRoute_Filter_FailureInjector:
			fi := k.FailureInjector
			if fi.GetStatus() < 100 || fi.GetStatus() > 599 {
				return rule, fmt.Errorf("failure injector status %d", fi.GetStatus())
			}
			rt.Fail = &Fault{Status: int(fi.GetStatus()), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
			if fi.GetRatio() != nil && fi.GetRatio().GetDenominator() == 0 {
				return rule, errors.New("failure injector ratio with a zero denominator")
			}
		default:
			return rule, errors.New("unknown filter")
		}
	}
	var err error
	rt.Backends, rt.FirstAvailable, err = httpBackends(prr.GetBackends(), target)
	if err != nil {
		return rule, err
	}
	rt.Timeouts = timeoutsOf(prr.GetTimeouts(), prr.GetRequestTimeout().AsDuration())
	if pr := prr.GetRetry(); pr != nil {
		rt.Retry = &Retry{
			MaxRetries:        pr.GetMaxRetries(),
			MaxRequestBytes:   int64(pr.GetMaxRequestBytes()),
			Timeout:           pr.GetTimeout().AsDuration(),
			MinBackoff:        pr.GetBackoff().GetMinBackoff().AsDuration(),
			MaxBackoff:        pr.GetBackoff().GetMaxBackoff().AsDuration(),
			Jitter:            float64(pr.GetBackoff().GetJitterRatio()),
			RespectRetryAfter: pr.GetBackoff().GetRespectRetryAfterHint(),
			NonIdempotent:     allMethods,
		}
		for _, sr := range pr.GetConditions().GetStatusRanges() {
			lo, hi := int(sr.GetStart()), int(sr.GetEnd())
			if hi == 0 {
				hi = lo
			}
			if lo < 100 || hi > 599 || lo > hi {
				return rule, fmt.Errorf("retry status range %d-%d", lo, hi)
			}
			rt.Retry.Statuses = append(rt.Retry.Statuses, [2]int{lo, hi})
		}
		normalizeRetry(rt.Retry)
	}
	rule.route = rt
	return rule, nil
}

func normalizeRetry(r *Retry) {
	if r.MaxRequestBytes <= 0 || r.MaxRequestBytes > retry.MaxBufferedBody {
		r.MaxRequestBytes = retry.MaxBufferedBody
	}
	if r.MaxRetries > 10 {
		r.MaxRetries = 10
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 25 * time.Millisecond
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = max(250*time.Millisecond, r.MinBackoff)
	}
}

func timeoutsOf(t *httproute.Timeouts, legacy time.Duration) Timeouts {
	out := Timeouts{
		Request:  t.GetRequest().AsDuration(),
		Response: t.GetResponse().AsDuration(),
		Idle:     t.GetIdle().AsDuration(),
	}
	if out.Response == 0 && legacy > 0 {
		out.Response = legacy
	}
	return out
}

func compileHTTPMatch(pm *httproute.HttpRouteMatch) (httpMatch, error) {
	// A match without a path condition is a prefix match on "/", as in
	// the Gateway API.
	m := httpMatch{path: pathMatch{kind: 2, value: "/"}}
	if p := pm.GetPath(); p != nil {
		switch k := p.GetKind().(type) {
		case *httproute.PathMatch_Exact:
			m.path = pathMatch{kind: 3, value: k.Exact}
		case *httproute.PathMatch_Prefix:
			m.path = pathMatch{kind: 2, value: k.Prefix}
		case *httproute.PathMatch_Regex:
			re, err := anchored(k.Regex)
			if err != nil {
				return m, err
			}
			m.path = pathMatch{kind: 1, value: k.Regex, re: re}
		default:
			return m, errors.New("path match without a value")
		}
	}
	if pm.GetMethod() != nil {
		meth, err := methodOf(pm.GetMethod())
		if err != nil {
			return m, err
		}
		m.method = meth
	}
	var err error
	if m.headers, err = headerMatches(pm.GetHeaders()); err != nil {
		return m, err
	}
	for _, q := range pm.GetQueryParams() {
		if q.GetName() == "" {
			return m, errors.New("query match without a name")
		}
		vm := valueMatch{name: q.GetName()}
		switch v := q.GetValue().(type) {
		case *httproute.QueryParamMatch_Exact:
			vm.exact = v.Exact
		case *httproute.QueryParamMatch_Regex:
			re, err := anchored(v.Regex)
			if err != nil {
				return m, err
			}
			vm.re = re
		default:
			return m, fmt.Errorf("query match %s without a value", q.GetName())
		}
		m.query = append(m.query, vm)
	}
	return m, nil
}

func headerMatches(phs []*httproute.HeaderMatch) ([]valueMatch, error) {
	var out []valueMatch
	for _, h := range phs {
		if h.GetName() == "" {
			return nil, errors.New("header match without a name")
		}
		vm := valueMatch{name: textproto.CanonicalMIMEHeaderKey(h.GetName())}
		switch v := h.GetValue().(type) {
		case *httproute.HeaderMatch_Exact:
			vm.exact = string(v.Exact)
		case *httproute.HeaderMatch_Regex:
			re, err := anchored(v.Regex)
			if err != nil {
				return nil, err
			}
			vm.re = re
		default:
			return nil, fmt.Errorf("header match %s without a value", h.GetName())
		}
		out = append(out, vm)
	}
	return out, nil
}

func anchored(expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + expr + `)$`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", expr, err)
	}
	return re, nil
}

func methodOf(pm *httptypes.HttpMethod) (string, error) {
	switch t := pm.GetType().(type) {
	case *httptypes.HttpMethod_Registered_:
		n, ok := httptypes.HttpMethod_Registered_name[int32(t.Registered)]
		if !ok {
			return "", fmt.Errorf("unknown method %d", t.Registered)
		}
		return n, nil
	case *httptypes.HttpMethod_Unregistered:
		if t.Unregistered == "" {
			return "", errors.New("empty method")
		}
		return t.Unregistered, nil
	}
	return "", errors.New("method match without a method")
}

func compileHosts(phs []*httproute.HostMatch) ([]hostMatch, error) {
	var out []hostMatch
	for _, h := range phs {
		switch m := h.GetMatch().(type) {
		case *httproute.HostMatch_Exact:
			out = append(out, hostMatch{value: strings.ToLower(strings.TrimSuffix(m.Exact, "."))})
		case *httproute.HostMatch_Suffix_:
			labels := m.Suffix.GetReverseLabels()
			if len(labels) == 0 {
				return nil, errors.New("host suffix without labels")
			}
			fwd := make([]string, 0, len(labels))
			for i := len(labels) - 1; i >= 0; i-- {
				fwd = append(fwd, strings.ToLower(labels[i]))
			}
			out = append(out, hostMatch{value: strings.Join(fwd, "."), suffix: true})
		default:
			return nil, errors.New("host match without a value")
		}
	}
	return out, nil
}

func headerModifier(add, set *httptypes.Headers, remove []string) (*HeaderModifier, error) {
	m := &HeaderModifier{Add: http.Header{}, Set: http.Header{}}
	for _, pair := range []struct {
		src *httptypes.Headers
		dst http.Header
	}{{add, m.Add}, {set, m.Set}} {
		for _, h := range pair.src.GetHeaders() {
			if !validName(h.GetName()) {
				return nil, fmt.Errorf("header modifier name %q", h.GetName())
			}
			if !validValue(string(h.GetValue())) {
				return nil, fmt.Errorf("header modifier value for %q", h.GetName())
			}
			k := textproto.CanonicalMIMEHeaderKey(h.GetName())
			pair.dst[k] = append(pair.dst[k], string(h.GetValue()))
		}
	}
	for _, k := range remove {
		if !validName(k) {
			return nil, fmt.Errorf("header modifier name %q", k)
		}
		m.Remove = append(m.Remove, textproto.CanonicalMIMEHeaderKey(k))
	}
	return m, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func redirectOf(pr *httproute.RequestRedirect) (*Redirect, error) {
	rd := &Redirect{Host: pr.GetHost(), Port: pr.GetPort(), Status: int(pr.GetStatus())}
	if rd.Status == 0 {
		rd.Status = http.StatusMovedPermanently
	}
	if rd.Status < 300 || rd.Status > 399 {
		return nil, fmt.Errorf("redirect status %d", rd.Status)
	}
	if rd.Port > 65535 {
		return nil, fmt.Errorf("redirect port %d", rd.Port)
	}
	if rd.Host != "" && !validValue(rd.Host) {
		return nil, errors.New("redirect host")
	}
	switch s := pr.GetScheme().GetType().(type) {
	case nil:
	case *httptypes.Scheme_Registered_:
		if s.Registered == httptypes.Scheme_HTTPS {
			rd.Scheme = "https"
		} else {
			rd.Scheme = "http"
		}
	case *httptypes.Scheme_Unregistered:
		rd.Scheme = strings.ToLower(s.Unregistered)
	}
	switch p := pr.GetPath().GetReplace().(type) {
	case nil:
	case *httproute.PathModifier_Full:
		rd.FullPath = p.Full
	case *httproute.PathModifier_Prefix:
		v := p.Prefix
		rd.PrefixPath = &v
	}
	return rd, nil
}

func httpBackends(d *outbound.HttpRoute_Distribution, target string) ([]Backend, bool, error) {
	if d == nil {
		return []Backend{{Name: target, Weight: 1, Authority: target}}, false, nil
	}
	switch k := d.GetKind().(type) {
	case *outbound.HttpRoute_Distribution_Empty_:
		return nil, false, nil
	case *outbound.HttpRoute_Distribution_FirstAvailable_:
		var out []Backend
		for _, rb := range k.FirstAvailable.GetBackends() {
			b, err := httpRouteBackend(rb, 1)
			if err != nil {
				return nil, false, err
			}
			out = append(out, b)
		}
		return out, true, nil
	case *outbound.HttpRoute_Distribution_RandomAvailable_:
		var out []Backend
		for _, wb := range k.RandomAvailable.GetBackends() {
			b, err := httpRouteBackend(wb.GetBackend(), wb.GetWeight())
			if err != nil {
				return nil, false, err
			}
			out = append(out, b)
		}
		return out, false, nil
	}
	return nil, false, errors.New("unknown distribution")
}

func httpRouteBackend(rb *outbound.HttpRoute_RouteBackend, weight uint32) (Backend, error) {
	b, err := backendOf(rb.GetBackend(), weight)
	if err != nil {
		return b, err
	}
	for _, f := range rb.GetFilters() {
		switch k := f.GetKind().(type) {
		case *outbound.HttpRoute_Filter_RequestHeaderModifier:
			m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
			if err != nil {
				return b, err
			}
			b.RequestHeaders = m
		case *outbound.HttpRoute_Filter_FailureInjector:
			fi := k.FailureInjector
			b.Fail = &Fault{Status: int(fi.GetStatus()), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
		case *outbound.HttpRoute_Filter_ResponseHeaderModifier, *outbound.HttpRoute_Filter_Redirect:
			// Not meaningful per backend; ignored as Linkerd does.
		default:
			return b, errors.New("unknown backend filter")
		}
	}
	return b, nil
}

func backendOf(pb *outbound.Backend, weight uint32) (Backend, error) {
	if pb == nil {
		return Backend{}, errors.New("route backend without a backend")
	}
	b := Backend{Weight: weight}
	switch k := pb.GetKind().(type) {
	case *outbound.Backend_Balancer:
		path := k.Balancer.GetDiscovery().GetDst().GetPath()
		if path == "" {
			return b, errors.New("balancer backend without a discovery path")
		}
		b.Authority = path
		if pe := k.Balancer.GetPeakEwma(); pe != nil {
			b.DefaultRTT = pe.GetDefaultRtt().AsDuration()
			b.Decay = pe.GetDecay().AsDuration()
		}
		if pe := k.Balancer.GetPenaltyPeakEwma(); pe != nil {
			b.DefaultRTT = pe.GetDefaultRtt().AsDuration()
			b.Decay = pe.GetDecay().AsDuration()
			b.Penalty = &balance.Penalty{Penalty: pe.GetPenalty().AsDuration(), MaxRetryAfter: pe.GetMaxRetryAfter().AsDuration()}
		}
		b.Name = metaName(pb.GetMetadata(), path)
	case *outbound.Backend_Forward:
		ep, err := endpointOf(k.Forward)
		if err != nil {
			return b, err
		}
		b.Forward = ep
		b.Name = metaName(pb.GetMetadata(), ep.Addr.String())
	default:
		return b, errors.New("backend without a kind")
	}
	return b, nil
}

func endpointOf(wa *destination.WeightedAddr) (*Endpoint, error) {
	ap, err := tcpAddr(wa.GetAddr())
	if err != nil {
		return nil, err
	}
	ep := &Endpoint{Addr: ap}
	if id := wa.GetTlsIdentity(); id != nil {
		ep.Identity = id.GetDnsLikeIdentity().GetName()
		if ep.Identity == "" {
			return nil, errors.New("forward endpoint with an identity that is not DNS-like")
		}
	}
	if p := wa.GetProtocolHint().GetOpaqueTransport().GetInboundPort(); p > 0 && p <= 65535 {
		ep.OpaqueTransportPort = uint16(p)
	}
	return ep, nil
}

func tcpAddr(a *pnet.TcpAddress) (netip.AddrPort, error) {
	if a == nil || a.GetPort() == 0 || a.GetPort() > 65535 {
		return netip.AddrPort{}, errors.New("endpoint address without a valid port")
	}
	var ip netip.Addr
	switch v := a.GetIp().GetIp().(type) {
	case *pnet.IPAddress_Ipv4:
		ip = netip.AddrFrom4([4]byte{byte(v.Ipv4 >> 24), byte(v.Ipv4 >> 16), byte(v.Ipv4 >> 8), byte(v.Ipv4)})
	case *pnet.IPAddress_Ipv6:
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i] = byte(v.Ipv6.GetFirst() >> (56 - 8*i))
			b[8+i] = byte(v.Ipv6.GetLast() >> (56 - 8*i))
		}
		ip = netip.AddrFrom16(b).Unmap()
	default:
		return netip.AddrPort{}, errors.New("endpoint address without an IP")
	}
	return netip.AddrPortFrom(ip, uint16(a.GetPort())), nil
}

func compileGRPCRule(prr *outbound.GrpcRoute_Rule, name, target string) (grpcRule, error) {
	var rule grpcRule
	for _, pm := range prr.GetMatches() {
		m := grpcMatch{service: pm.GetRpc().GetService(), method: pm.GetRpc().GetMethod()}
		var err error
		if m.headers, err = headerMatches(pm.GetHeaders()); err != nil {
			return rule, err
		}
		rule.matches = append(rule.matches, m)
	}
	rt := &Route{Name: name}
	for _, f := range prr.GetFilters() {
		switch k := f.GetKind().(type) {
		case *outbound.GrpcRoute_Filter_RequestHeaderModifier:
			m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
			if err != nil {
				return rule, err
			}
			rt.RequestHeaders = m
		case *outbound.GrpcRoute_Filter_FailureInjector:
			fi := k.FailureInjector
			if fi.GetRatio() != nil && fi.GetRatio().GetDenominator() == 0 {
				return rule, errors.New("failure injector ratio with a zero denominator")
			}
			rt.Fail = &Fault{GRPC: true, GRPCCode: fi.GetCode(), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
		default:
			return rule, errors.New("unknown filter")
		}
	}
	var err error
	rt.Backends, rt.FirstAvailable, err = grpcBackends(prr.GetBackends(), target)
	if err != nil {
		return rule, err
	}
	rt.Timeouts = timeoutsOf(prr.GetTimeouts(), prr.GetRequestTimeout().AsDuration())
	if pr := prr.GetRetry(); pr != nil {
		rt.Retry = &Retry{
			MaxRetries:      pr.GetMaxRetries(),
			MaxRequestBytes: int64(pr.GetMaxRequestBytes()),
			Timeout:         pr.GetTimeout().AsDuration(),
			MinBackoff:      pr.GetBackoff().GetMinBackoff().AsDuration(),
			MaxBackoff:      pr.GetBackoff().GetMaxBackoff().AsDuration(),
			Jitter:          float64(pr.GetBackoff().GetJitterRatio()),
			GRPCCodes:       map[uint32]bool{},
			// A trailers-only answer may carry grpc-retry-pushback-ms.
			RespectRetryAfter: pr.GetBackoff().GetRespectRetryAfterHint(),
			// gRPC calls are all POSTs; a GRPCRoute retry policy is the
			// operator's statement that its methods may be repeated.
			NonIdempotent: true,
		}
		c := pr.GetConditions()
		for code, on := range map[uint32]bool{1: c.GetCancelled(), 4: c.GetDeadineExceeded(), 8: c.GetResourceExhausted(), 13: c.GetInternal(), 14: c.GetUnavailable()} {
			if on {
				rt.Retry.GRPCCodes[code] = true
			}
		}
		normalizeRetry(rt.Retry)
	}
	rule.route = rt
	return rule, nil
}

func grpcBackends(d *outbound.GrpcRoute_Distribution, target string) ([]Backend, bool, error) {
	if d == nil {
		return []Backend{{Name: target, Weight: 1, Authority: target}}, false, nil
	}
	one := func(rb *outbound.GrpcRoute_RouteBackend, w uint32) (Backend, error) {
		b, err := backendOf(rb.GetBackend(), w)
		if err != nil {
			return b, err
		}
		for _, f := range rb.GetFilters() {
			switch k := f.GetKind().(type) {
			case *outbound.GrpcRoute_Filter_RequestHeaderModifier:
				m, err := headerModifier(k.RequestHeaderModifier.GetAdd(), k.RequestHeaderModifier.GetSet(), k.RequestHeaderModifier.GetRemove())
				if err != nil {
					return b, err
				}
				b.RequestHeaders = m
			case *outbound.GrpcRoute_Filter_FailureInjector:
				fi := k.FailureInjector
				b.Fail = &Fault{GRPC: true, GRPCCode: fi.GetCode(), Message: fi.GetMessage(), Numerator: fi.GetRatio().GetNumerator(), Denominator: fi.GetRatio().GetDenominator()}
			default:
				return b, errors.New("unknown backend filter")
			}
		}
		return b, nil
	}
	switch k := d.GetKind().(type) {
	case *outbound.GrpcRoute_Distribution_Empty_:
		return nil, false, nil
	case *outbound.GrpcRoute_Distribution_FirstAvailable_:
		var out []Backend
		for _, rb := range k.FirstAvailable.GetBackends() {
			b, err := one(rb, 1)
			if err != nil {
				return nil, false, err
			}
			out = append(out, b)
		}
		return out, true, nil
	case *outbound.GrpcRoute_Distribution_RandomAvailable_:
		var out []Backend
		for _, wb := range k.RandomAvailable.GetBackends() {
			b, err := one(wb.GetBackend(), wb.GetWeight())
			if err != nil {
				return nil, false, err
			}
			out = append(out, b)
		}
		return out, false, nil
	}
	return nil, false, errors.New("unknown distribution")
}

// maxProfileRetries bounds retries of ServiceProfile routes, which have
// no count of their own (only the budget).
const maxProfileRetries = 3

func (r *Router) compileProfile(p *destination.DestinationProfile) error {
	if p.GetOpaqueProtocol() {
		r.Opaque = true
	}
	if b := p.GetRetryBudget(); b != nil {
		r.Budget = retry.BudgetOptions{Ratio: float64(b.GetRetryRatio()), MinPerSecond: b.GetMinRetriesPerSecond(), TTL: b.GetTtl().AsDuration()}
	}
	for _, o := range p.GetDstOverrides() {
		if o.GetAuthority() == "" {
			return errors.New("traffic split override without an authority")
		}
		r.split = append(r.split, Backend{Name: metaName(o.GetBackendRef(), o.GetAuthority()), Weight: o.GetWeight(), Authority: o.GetAuthority()})
	}
	for i, pr := range p.GetRoutes() {
		name := pr.GetMetricsLabels()["route"]
		if name == "" {
			name = fmt.Sprintf("profile-route-%d", i)
		}
		m, err := compileRequestMatch(pr.GetCondition(), 0)
		if err != nil {
			return fmt.Errorf("route %s: %w", name, err)
		}
		rt := &Route{Name: name, Timeouts: Timeouts{Request: pr.GetTimeout().AsDuration()}}
		for _, rc := range pr.GetResponseClasses() {
			rm, err := compileResponseMatch(rc.GetCondition(), 0)
			if err != nil {
				return fmt.Errorf("route %s: %w", name, err)
			}
			rt.Classes = append(rt.Classes, ResponseClass{match: rm, Failure: rc.GetIsFailure()})
		}
		if pr.GetIsRetryable() {
			rt.Retry = &Retry{MaxRetries: maxProfileRetries, OnFailureClass: true, NonIdempotent: true}
			normalizeRetry(rt.Retry)
		}
		r.profile = append(r.profile, profileRoute{name: name, match: m, route: rt})
	}
	r.prof = len(r.profile) > 0 || len(r.split) > 0
	backends := r.split
	if len(backends) == 0 {
		backends = []Backend{{Name: r.target, Weight: 1, Authority: r.target}}
	}
	for _, pr := range r.profile {
		pr.route.Backends = backends
	}
	if r.prof {
		r.def = &Route{Name: "default", Backends: backends}
	}
	return nil
}

const maxMatchDepth = 16

func compileRequestMatch(m *destination.RequestMatch, depth int) (requestMatch, error) {
	if m == nil {
		return nil, errors.New("route without a condition")
	}
	if depth > maxMatchDepth {
		return nil, errors.New("condition nested too deeply")
	}
	switch k := m.GetMatch().(type) {
	case *destination.RequestMatch_All:
		var subs []requestMatch
		for _, s := range k.All.GetMatches() {
			f, err := compileRequestMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(method, path string) bool {
			for _, f := range subs {
				if !f(method, path) {
					return false
				}
			}
			return true
		}, nil
	case *destination.RequestMatch_Any:
		var subs []requestMatch
		for _, s := range k.Any.GetMatches() {
			f, err := compileRequestMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(method, path string) bool {
			for _, f := range subs {
				if f(method, path) {
					return true
				}
			}
			return false
		}, nil
	case *destination.RequestMatch_Not:
		f, err := compileRequestMatch(k.Not, depth+1)
		if err != nil {
			return nil, err
		}
		return func(method, path string) bool { return !f(method, path) }, nil
	case *destination.RequestMatch_Path:
		re, err := anchored(k.Path.GetRegex())
		if err != nil {
			return nil, err
		}
		return func(_, path string) bool { return re.MatchString(path) }, nil
	case *destination.RequestMatch_Method:
		meth, err := methodOf(k.Method)
		if err != nil {
			return nil, err
		}
		return func(method, _ string) bool { return method == meth }, nil
	}
	return nil, errors.New("unknown request condition")
}

func compileResponseMatch(m *destination.ResponseMatch, depth int) (responseMatch, error) {
	if m == nil {
		return nil, errors.New("response class without a condition")
	}
	if depth > maxMatchDepth {
		return nil, errors.New("condition nested too deeply")
	}
	switch k := m.GetMatch().(type) {
	case *destination.ResponseMatch_All:
		var subs []responseMatch
		for _, s := range k.All.GetMatches() {
			f, err := compileResponseMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(st int) bool {
			for _, f := range subs {
				if !f(st) {
					return false
				}
			}
			return true
		}, nil
	case *destination.ResponseMatch_Any:
		var subs []responseMatch
		for _, s := range k.Any.GetMatches() {
			f, err := compileResponseMatch(s, depth+1)
			if err != nil {
				return nil, err
			}
			subs = append(subs, f)
		}
		return func(st int) bool {
			for _, f := range subs {
				if f(st) {
					return true
				}
			}
			return false
		}, nil
	case *destination.ResponseMatch_Not:
		f, err := compileResponseMatch(k.Not, depth+1)
		if err != nil {
			return nil, err
		}
		return func(st int) bool { return !f(st) }, nil
	case *destination.ResponseMatch_Status:
		lo, hi := int(k.Status.GetMin()), int(k.Status.GetMax())
		if hi == 0 {
			hi = 599
		}
		if lo > hi {
			return nil, fmt.Errorf("status range %d-%d", lo, hi)
		}
		return func(st int) bool { return st >= lo && st <= hi }, nil
	}
	return nil, errors.New("unknown response condition")
}

// Select returns the route of a request. It never returns nil.
func (r *Router) Select(req Request) *Route {
	if r.prof {
		for _, pr := range r.profile {
			if pr.match(req.Method, req.Path) {
				return pr.route
			}
		}
		return r.def
	}
	if req.GRPC && r.isGRPC {
		if rt := selectGRPC(r.grpc, req); rt != nil {
			return rt
		}
		if len(r.grpc) > 0 {
			return notFound
		}
		return r.def
	}
	routes := r.h1
	if req.HTTP2 {
		routes = r.h2
	}
	if len(routes) == 0 {
		return r.def
	}
	if rt := selectHTTP(routes, req); rt != nil {
		return rt
	}
	return notFound
}

// notFound is the route of requests that match none of the configured
// routes: no backends, answered with 404 by the proxy.
var notFound = &Route{Name: "not-found"}

// NotFound reports whether rt is the route of unmatched requests.
func NotFound(rt *Route) bool { return rt == notFound }

type score struct {
	host     int // 0 none matched yet; 1 any; 2+len wildcard; 1000+ exact
	pathKind uint8
	pathLen  int
	method   bool
	headers  int
	query    int
}

func (a score) less(b score) bool {
	switch {
	case a.host != b.host:
		return a.host < b.host
	case a.pathKind != b.pathKind:
		return a.pathKind < b.pathKind
	case a.pathLen != b.pathLen:
		return a.pathLen < b.pathLen
	case a.method != b.method:
		return !a.method
	case a.headers != b.headers:
		return a.headers < b.headers
	}
	return a.query < b.query
}

func hostScore(hs []hostMatch, host string) int {
	if len(hs) == 0 {
		return 1
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	best := -1
	for _, h := range hs {
		switch {
		case !h.suffix && h.value == host:
			return 100000
		case h.suffix && strings.HasSuffix(host, "."+h.value):
			if s := 2 + len(h.value); s > best {
				best = s
			}
		}
	}
	return best
}

func selectHTTP(routes []httpRoute, req Request) *Route {
	var best *Route
	var bestScore score
	var query url.Values
	for ri := range routes {
		rt := &routes[ri]
		hs := hostScore(rt.hosts, req.Host)
		if hs < 0 {
			continue
		}
		for _, rule := range rt.rules {
			if len(rule.matches) == 0 {
				sc := score{host: hs, pathKind: 2, pathLen: 1}
				if best == nil || bestScore.less(sc) {
					best, bestScore = rule.route, sc
				}
				continue
			}
			for mi := range rule.matches {
				m := &rule.matches[mi]
				sc, prefix, ok := matchHTTP(m, req, &query)
				if !ok {
					continue
				}
				sc.host = hs
				if best == nil || bestScore.less(sc) {
					if prefix != "" && rule.route.Redirect != nil && rule.route.Redirect.PrefixPath != nil {
						cp := *rule.route
						cp.matchedPrefix = prefix
						best = &cp
					} else {
						best = rule.route
					}
					bestScore = sc
				}
			}
		}
	}
	return best
}

func matchHTTP(m *httpMatch, req Request, query *url.Values) (score, string, bool) {
	var sc score
	prefix := ""
	switch m.path.kind {
	case 3:
		if req.Path != m.path.value {
			return sc, "", false
		}
		sc.pathKind, sc.pathLen = 3, len(m.path.value)
	case 2:
		if !prefixMatch(m.path.value, req.Path) {
			return sc, "", false
		}
		sc.pathKind, sc.pathLen = 2, len(strings.TrimSuffix(m.path.value, "/"))+1
		prefix = m.path.value
	case 1:
		if !m.path.re.MatchString(req.Path) {
			return sc, "", false
		}
		sc.pathKind, sc.pathLen = 1, len(m.path.value)
	}
	if m.method != "" {
		if req.Method != m.method {
			return sc, "", false
		}
		sc.method = true
	}
	for _, h := range m.headers {
		if !valuesMatch(h, req.Header[h.name]) {
			return sc, "", false
		}
	}
	sc.headers = len(m.headers)
	if len(m.query) > 0 {
		if *query == nil {
			q, _ := url.ParseQuery(req.RawQuery)
			*query = q
		}
		for _, q := range m.query {
			if !valuesMatch(q, (*query)[q.name]) {
				return sc, "", false
			}
		}
		sc.query = len(m.query)
	}
	return sc, prefix, true
}

// prefixMatch matches whole path segments: "/foo" matches "/foo",
// "/foo/" and "/foo/bar" but not "/foobar".
func prefixMatch(prefix, path string) bool {
	p := strings.TrimSuffix(prefix, "/")
	if p == "" {
		return true
	}
	if !strings.HasPrefix(path, p) {
		return false
	}
	return len(path) == len(p) || path[len(p)] == '/'
}

func valuesMatch(m valueMatch, vs []string) bool {
	if len(vs) == 0 {
		return false
	}
	for _, v := range vs {
		if m.re != nil {
			if m.re.MatchString(v) {
				return true
			}
		} else if v == m.exact {
			return true
		}
	}
	return false
}

func selectGRPC(routes []grpcRoute, req Request) *Route {
	svc, method := "", ""
	if p := strings.TrimPrefix(req.Path, "/"); p != req.Path {
		if i := strings.IndexByte(p, '/'); i > 0 {
			svc, method = p[:i], p[i+1:]
		}
	}
	var best *Route
	var bestScore score
	for ri := range routes {
		rt := &routes[ri]
		hs := hostScore(rt.hosts, req.Host)
		if hs < 0 {
			continue
		}
		for _, rule := range rt.rules {
			if len(rule.matches) == 0 {
				sc := score{host: hs}
				if best == nil || bestScore.less(sc) {
					best, bestScore = rule.route, sc
				}
				continue
			}
			for _, m := range rule.matches {
				if (m.service != "" && m.service != svc) || (m.method != "" && m.method != method) {
					continue
				}
				ok := true
				for _, h := range m.headers {
					ok = ok && valuesMatch(h, req.Header[h.name])
				}
				if !ok {
					continue
				}
				sc := score{host: hs, headers: len(m.headers)}
				if m.service != "" {
					sc.pathLen += 2
				}
				if m.method != "" {
					sc.pathLen++
				}
				if best == nil || bestScore.less(sc) {
					best, bestScore = rule.route, sc
				}
			}
		}
	}
	return best
}

// PickBackend chooses among a route's backends by weight; usable says
// whether a backend can take the request now (FirstAvailable takes the
// first usable one; a weighted choice prefers usable backends). It
// returns -1 when there is none.
func PickBackend(bs []Backend, firstAvailable bool, usable func(i int) bool) int {
	if len(bs) == 0 {
		return -1
	}
	if firstAvailable {
		for i := range bs {
			if usable(i) {
				return i
			}
		}
		return 0
	}
	if len(bs) == 1 {
		if bs[0].Weight == 0 {
			return -1
		}
		return 0
	}
	var total uint64
	for _, b := range bs {
		total += uint64(b.Weight)
	}
	if total == 0 {
		return -1
	}
	n := rand.Uint64N(total)
	for i, b := range bs {
		if n < uint64(b.Weight) {
			return i
		}
		n -= uint64(b.Weight)
	}
	return len(bs) - 1
}
