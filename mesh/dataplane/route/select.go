package route

import (
	"math/rand/v2"

	"github.com/weftmesh/weft/mesh/internal/routematch"
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

// matcherOf reads a request for routematch. Outbound, a header or query
// parameter sent more than once matches when any of its values does, as
// in Linkerd's proxy: choosing a route grants nothing.
func matcherOf(req *Request) routematch.Matcher {
	return routematch.New(&routematch.Request{Method: req.Method, Path: req.Path, RawQuery: req.RawQuery, Host: req.Host, Header: req.Header}, routematch.AnyValue)
}

func selectHTTP(routes []httpRoute, req Request) *Route {
	m := matcherOf(&req)
	var best *Route
	var bestRank routematch.Rank
	for ri := range routes {
		rt := &routes[ri]
		host, ok := m.Host(rt.hosts)
		if !ok {
			continue
		}
		for _, rule := range rt.rules {
			if len(rule.matches) == 0 {
				if rk := routematch.AnyRequest(host); best == nil || bestRank.Less(rk) {
					best, bestRank = rule.route, rk
				}
				continue
			}
			for mi := range rule.matches {
				hm := &rule.matches[mi]
				rk, o := m.HTTP(host, hm)
				if o == routematch.NoMatch || best != nil && !bestRank.Less(rk) {
					continue
				}
				best, bestRank = rule.route, rk
				if pfx := matchedPrefix(hm.Path); pfx != "" && rule.route.Redirect != nil && rule.route.Redirect.PrefixPath != nil {
					cp := *rule.route
					cp.matchedPrefix = pfx
					best = &cp
				}
			}
		}
	}
	return best
}

// matchedPrefix is the prefix a redirect's prefix rewrite replaces: the
// match's prefix, "/" without a path condition, none for exact and regex
// matches.
func matchedPrefix(p *routematch.Path) string {
	switch {
	case p == nil:
		return "/"
	case p.Kind == routematch.PathPrefix:
		return p.Value
	}
	return ""
}

func selectGRPC(routes []grpcRoute, req Request) *Route {
	m := matcherOf(&req)
	var best *Route
	var bestRank routematch.Rank
	for ri := range routes {
		rt := &routes[ri]
		host, ok := m.Host(rt.hosts)
		if !ok {
			continue
		}
		for _, rule := range rt.rules {
			if len(rule.matches) == 0 {
				if rk := routematch.AnyCall(host); best == nil || bestRank.Less(rk) {
					best, bestRank = rule.route, rk
				}
				continue
			}
			for mi := range rule.matches {
				rk, o := m.GRPC(host, &rule.matches[mi])
				if o != routematch.NoMatch && (best == nil || bestRank.Less(rk)) {
					best, bestRank = rule.route, rk
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

// ReadsHeaders reports whether any route of r matches on request
// headers: only then must a caller that holds the request in another
// form (the proxy's frame path) build Request.Header.
func (r *Router) ReadsHeaders() bool {
	if r.prof {
		return false // profile routes match method and path only
	}
	for _, routes := range [][]httpRoute{r.h1, r.h2} {
		for ri := range routes {
			for _, rule := range routes[ri].rules {
				for mi := range rule.matches {
					if len(rule.matches[mi].Headers) > 0 {
						return true
					}
				}
			}
		}
	}
	for ri := range r.grpc {
		for _, rule := range r.grpc[ri].rules {
			for mi := range rule.matches {
				if len(rule.matches[mi].Headers) > 0 {
					return true
				}
			}
		}
	}
	return false
}
