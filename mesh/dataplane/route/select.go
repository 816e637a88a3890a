package route

import (
	"math/rand/v2"
	"net/url"
	"strings"
)

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
