package authz

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// score ranks a match; greater is more specific.
type score struct {
	host      int // 0: route has no hosts; 1+len: suffix; 1000+len: exact
	pathLen   int
	pathKind  int // tie-breaker at equal length: exact 3 > regex 2 > prefix 1
	method    bool
	headers   int
	query     int
	ambiguous bool
}

func (a score) less(b score) bool {
	if a.host != b.host {
		return a.host < b.host
	}
	if a.pathLen != b.pathLen {
		return a.pathLen < b.pathLen
	}
	if a.pathKind != b.pathKind {
		return a.pathKind < b.pathKind
	}
	if a.method != b.method {
		return !a.method
	}
	if a.headers != b.headers {
		return a.headers < b.headers
	}
	return a.query < b.query
}

// hostScore returns the score of the best host match, or -1.
func hostScore(hosts []HostMatch, host string) int {
	if len(hosts) == 0 {
		return 0
	}
	h := normalizeHost(host)
	best := -1
	for _, m := range hosts {
		v := strings.TrimSuffix(m.Value, ".")
		if m.Suffix {
			if len(h) > len(v)+1 && h[len(h)-len(v)-1] == '.' && strings.EqualFold(h[len(h)-len(v):], v) {
				if sc := 1 + len(v); sc > best {
					best = sc
				}
			}
		} else if strings.EqualFold(h, v) {
			if sc := 1000 + len(v); sc > best {
				best = sc
			}
		}
	}
	return best
}

// normalizeHost strips a port and a trailing dot from an authority.
func normalizeHost(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.IndexByte(host, ':') == i {
		host = host[:i]
	}
	return strings.TrimSuffix(host, ".")
}

func pathScore(m *PathMatch, path string) (int, int, bool) {
	if m == nil {
		return 1, 1, true // like prefix "/"
	}
	switch m.Kind {
	case PathExact:
		if path == m.Value {
			return len(m.Value), 3, true
		}
	case PathPrefix:
		if m.Value == "/" {
			return 1, 1, true
		}
		pfx := strings.TrimRight(m.Value, "/")
		p := strings.TrimRight(path, "/")
		if strings.HasPrefix(p, pfx) && (len(p) == len(pfx) || p[len(pfx)] == '/') {
			return len(pfx), 1, true
		}
	case PathRegex:
		if m.Regex != nil && m.Regex.MatchString(path) {
			return len(path), 2, true
		}
	}
	return 0, 0, false
}

// matchValues evaluates a header or query match against all of a field's
// values. It returns (matched, ambiguous): ambiguous when some values
// match and others do not, counting every field line and every
// comma-separated element of a line.
func matchValues(m *ValueMatch, values []string) (bool, bool) {
	if len(values) == 0 {
		return false, false
	}
	yes, no := 0, 0
	test := func(v string) {
		if matchValue(m, v) {
			yes++
		} else {
			no++
		}
	}
	for _, v := range values {
		test(v)
		if strings.IndexByte(v, ',') >= 0 {
			for _, part := range strings.Split(v, ",") {
				test(strings.TrimSpace(part))
			}
		}
	}
	if yes > 0 && no > 0 {
		return false, true
	}
	return yes > 0, false
}

func matchValue(m *ValueMatch, v string) bool {
	if m.Regex != nil {
		return m.Regex.MatchString(v)
	}
	return v == m.Exact
}

func headerValues(h http.Header, name string) []string {
	if h == nil {
		return nil
	}
	return h[textproto.CanonicalMIMEHeaderKey(name)]
}

func httpMatch(m *HTTPMatch, req *Request, path, rawQuery string, query *url.Values) (score, bool) {
	var sc score
	if m.Method != "" {
		if req.Method != m.Method {
			return sc, false
		}
		sc.method = true
	}
	var ok bool
	sc.pathLen, sc.pathKind, ok = pathScore(m.Path, path)
	if !ok {
		return sc, false
	}
	for i := range m.Headers {
		matched, amb := matchValues(&m.Headers[i], headerValues(req.Header, m.Headers[i].Name))
		if amb {
			sc.ambiguous = true
			return sc, true
		}
		if !matched {
			return sc, false
		}
	}
	sc.headers = len(m.Headers)
	if len(m.Query) > 0 {
		if *query == nil {
			q, err := url.ParseQuery(rawQuery)
			if err != nil {
				// An unparsable query cannot be matched reliably.
				sc.ambiguous = true
				return sc, true
			}
			*query = q
		}
		for i := range m.Query {
			matched, amb := matchValues(&m.Query[i], (*query)[m.Query[i].Name])
			if amb {
				sc.ambiguous = true
				return sc, true
			}
			if !matched {
				return sc, false
			}
		}
	}
	sc.query = len(m.Query)
	return sc, true
}

func selectHTTPRoute(routes []HTTPRoute, req *Request, path, rawQuery string, t *tracer) (*HTTPRoute, Reason) {
	var best *HTTPRoute
	var bestScore score
	var query url.Values
	for ri := range routes {
		r := &routes[ri]
		hs := hostScore(r.Hosts, req.Host)
		if hs < 0 {
			if t != nil {
				t.printf("route %s does not match host %q", r.Meta, req.Host)
			}
			continue
		}
		matched := false
		for _, rule := range r.Rules {
			if len(rule.Matches) == 0 {
				sc := score{host: hs, pathLen: 1, pathKind: 1}
				if best == nil || bestScore.less(sc) {
					best, bestScore = r, sc
				}
				matched = true
				continue
			}
			for mi := range rule.Matches {
				sc, ok := httpMatch(&rule.Matches[mi], req, path, rawQuery, &query)
				if !ok {
					continue
				}
				if sc.ambiguous {
					if t != nil {
						t.printf("route %s matches on a header or query parameter whose repeated values disagree; the request is refused", r.Meta)
					}
					return nil, ReasonAmbiguousRequest
				}
				sc.host = hs
				matched = true
				if best == nil || bestScore.less(sc) {
					best, bestScore = r, sc
				}
			}
		}
		if !matched {
			if t != nil {
				t.printf("route %s does not match the request", r.Meta)
			}
		}
	}
	if best == nil {
		if t != nil {
			t.printf("no route of the server matches the request")
		}
		return nil, ReasonNoRoute
	}
	if t != nil {
		t.printf("route: %s", best.Meta)
	}
	return best, ReasonNone
}

func selectGRPCRoute(routes []GRPCRoute, req *Request, path string, t *tracer) (*GRPCRoute, Reason) {
	// A gRPC path is /package.Service/Method.
	svc, method := "", ""
	if p := strings.TrimPrefix(path, "/"); p != path {
		if i := strings.IndexByte(p, '/'); i > 0 {
			svc, method = p[:i], p[i+1:]
		}
	}
	var best *GRPCRoute
	var bestScore score
	for ri := range routes {
		r := &routes[ri]
		hs := hostScore(r.Hosts, req.Host)
		if hs < 0 {
			continue
		}
		for _, rule := range r.Rules {
			if len(rule.Matches) == 0 {
				sc := score{host: hs}
				if best == nil || bestScore.less(sc) {
					best, bestScore = r, sc
				}
				continue
			}
			for mi := range rule.Matches {
				m := &rule.Matches[mi]
				if (m.Service != "" && m.Service != svc) || (m.Method != "" && m.Method != method) {
					continue
				}
				if svc == "" && (m.Service != "" || m.Method != "") {
					continue
				}
				sc := score{host: hs}
				if m.Service != "" {
					sc.pathLen += 2
				}
				if m.Method != "" {
					sc.pathLen++
				}
				ok := true
				for i := range m.Headers {
					matched, amb := matchValues(&m.Headers[i], headerValues(req.Header, m.Headers[i].Name))
					if amb {
						if t != nil {
							t.printf("route %s matches on a header whose repeated values disagree; the call is refused", r.Meta)
						}
						return nil, ReasonAmbiguousRequest
					}
					if !matched {
						ok = false
						break
					}
				}
				if !ok {
					continue
				}
				sc.headers = len(m.Headers)
				if best == nil || bestScore.less(sc) {
					best, bestScore = r, sc
				}
			}
		}
	}
	if best == nil {
		if t != nil {
			t.printf("no gRPC route of the server matches %s/%s", svc, method)
		}
		return nil, ReasonNoRoute
	}
	if t != nil {
		t.printf("route: %s", best.Meta)
	}
	return best, ReasonNone
}

func isNormalPath(p string) bool {
	n, err := pathnorm.Normalize(p)
	return err == nil && n == p
}
