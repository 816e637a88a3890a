package route

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
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
	"github.com/weftmesh/weft/mesh/internal/routematch"
)

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
	// The built-in routes of a Service's policy ("http", "grpc") are the
	// default route; an EgressNetwork's ("http-egress-allow", ...) keep
	// their names, which Linkerd's metrics and queries use.
	builtin := pol.GetMetadata().GetResource().GetKind() != "EgressNetwork"
	var err error
	switch k := p.GetKind().(type) {
	case *outbound.ProxyProtocol_Detect_:
		if r.h1, err = compileRoutes(k.Detect.GetHttp1().GetRoutes(), r.target, builtin, compileHTTPRule); err != nil {
			return err
		}
		if r.h2, err = compileRoutes(k.Detect.GetHttp2().GetRoutes(), r.target, builtin, compileHTTPRule); err != nil {
			return err
		}
		r.Accrual = accrualOf(k.Detect.GetHttp2().GetFailureAccrual())
		if r.Accrual == nil {
			r.Accrual = accrualOf(k.Detect.GetHttp1().GetFailureAccrual())
		}
	case *outbound.ProxyProtocol_Http1_:
		if r.h1, err = compileRoutes(k.Http1.GetRoutes(), r.target, builtin, compileHTTPRule); err != nil {
			return err
		}
		r.h2 = r.h1
		r.Accrual = accrualOf(k.Http1.GetFailureAccrual())
	case *outbound.ProxyProtocol_Http2_:
		if r.h2, err = compileRoutes(k.Http2.GetRoutes(), r.target, builtin, compileHTTPRule); err != nil {
			return err
		}
		r.h1 = r.h2
		r.Accrual = accrualOf(k.Http2.GetFailureAccrual())
	case *outbound.ProxyProtocol_Grpc_:
		if r.grpc, err = compileRoutes(k.Grpc.GetRoutes(), r.target, builtin, compileGRPCRule); err != nil {
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
func compileRoutes[M routeMessage[R], R, Rule any](prs []M, target string, builtinIsDefault bool, compileRule func(R, string, string) (Rule, error)) ([]compiledRoute[Rule], error) {
	var out []compiledRoute[Rule]
	for i, pr := range prs {
		name := metaName(pr.GetMetadata(), fmt.Sprintf("route-%d", i))
		if _, builtin := pr.GetMetadata().GetKind().(*meta.Metadata_Default); builtin && builtinIsDefault {
			// The policy's own route of a Service that no route resource
			// covers ("http", "grpc"): its requests are the default
			// route's, as on a destination without a policy.
			name = DefaultName
		}
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
		allMethods = allMethods && m.Method != ""
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
	//lint:ignore SA1019 request_timeout is deprecated in the proxy API in favour of timeouts, but a control plane that sends only it must still be obeyed (timeoutsOf uses it when timeouts.response is unset)
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

func compileHTTPMatch(pm *httproute.HttpRouteMatch) (routematch.HTTP, error) {
	// A match without a path condition is a prefix match on "/", as in
	// the Gateway API; routematch reads a nil Path so.
	var m routematch.HTTP
	if p := pm.GetPath(); p != nil {
		switch k := p.GetKind().(type) {
		case *httproute.PathMatch_Exact:
			m.Path = &routematch.Path{Kind: routematch.PathExact, Value: k.Exact}
		case *httproute.PathMatch_Prefix:
			m.Path = &routematch.Path{Kind: routematch.PathPrefix, Value: k.Prefix}
		case *httproute.PathMatch_Regex:
			re, err := anchored(k.Regex)
			if err != nil {
				return m, err
			}
			m.Path = &routematch.Path{Kind: routematch.PathRegex, Value: k.Regex, Regex: re}
		default:
			return m, errors.New("path match without a value")
		}
	}
	if pm.GetMethod() != nil {
		meth, err := methodOf(pm.GetMethod())
		if err != nil {
			return m, err
		}
		m.Method = meth
	}
	var err error
	if m.Headers, err = headerMatches(pm.GetHeaders()); err != nil {
		return m, err
	}
	for _, q := range pm.GetQueryParams() {
		if q.GetName() == "" {
			return m, errors.New("query match without a name")
		}
		vm := routematch.Value{Name: q.GetName()}
		switch v := q.GetValue().(type) {
		case *httproute.QueryParamMatch_Exact:
			vm.Exact = v.Exact
		case *httproute.QueryParamMatch_Regex:
			re, err := anchored(v.Regex)
			if err != nil {
				return m, err
			}
			vm.Regex = re
		default:
			return m, fmt.Errorf("query match %s without a value", q.GetName())
		}
		m.Query = append(m.Query, vm)
	}
	return m, nil
}

func headerMatches(phs []*httproute.HeaderMatch) ([]routematch.Value, error) {
	var out []routematch.Value
	for _, h := range phs {
		if h.GetName() == "" {
			return nil, errors.New("header match without a name")
		}
		vm := routematch.Value{Name: textproto.CanonicalMIMEHeaderKey(h.GetName())}
		switch v := h.GetValue().(type) {
		case *httproute.HeaderMatch_Exact:
			vm.Exact = string(v.Exact)
		case *httproute.HeaderMatch_Regex:
			re, err := anchored(v.Regex)
			if err != nil {
				return nil, err
			}
			vm.Regex = re
		default:
			return nil, fmt.Errorf("header match %s without a value", h.GetName())
		}
		out = append(out, vm)
	}
	return out, nil
}

func anchored(expr string) (*regexp.Regexp, error) {
	re, err := routematch.Anchored(expr)
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

func compileHosts(phs []*httproute.HostMatch) ([]routematch.Host, error) {
	var out []routematch.Host
	for _, h := range phs {
		switch m := h.GetMatch().(type) {
		case *httproute.HostMatch_Exact:
			out = append(out, routematch.Host{Value: strings.ToLower(strings.TrimSuffix(m.Exact, "."))})
		case *httproute.HostMatch_Suffix_:
			labels := m.Suffix.GetReverseLabels()
			if len(labels) == 0 {
				return nil, errors.New("host suffix without labels")
			}
			fwd := make([]string, 0, len(labels))
			for i := len(labels) - 1; i >= 0; i-- {
				fwd = append(fwd, strings.ToLower(labels[i]))
			}
			out = append(out, routematch.Host{Value: strings.Join(fwd, "."), Suffix: true})
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
		out, err := backendList(k.FirstAvailable.GetBackends(), func(rb *outbound.HttpRoute_RouteBackend) (Backend, error) {
			return httpRouteBackend(rb, 1)
		})
		return out, true, err
	case *outbound.HttpRoute_Distribution_RandomAvailable_:
		out, err := backendList(k.RandomAvailable.GetBackends(), func(wb *outbound.HttpRoute_WeightedRouteBackend) (Backend, error) {
			return httpRouteBackend(wb.GetBackend(), wb.GetWeight())
		})
		return out, false, err
	}
	return nil, false, errors.New("unknown distribution")
}

// backendList builds one Backend per item, stopping at the first error;
// the HTTP and gRPC distributions share it.
func backendList[T any](items []T, build func(T) (Backend, error)) ([]Backend, error) {
	var out []Backend
	for _, it := range items {
		b, err := build(it)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
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
