package authz

import (
	"github.com/weftmesh/weft/mesh/internal/routematch"
	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// The inbound side reads repeated header and query values strictly
// (routematch.EveryValue): when they disagree about a condition the
// request is refused, since the application may act on another value
// than the one that matched.

func matcherOf(req *Request, path, rawQuery string) routematch.Matcher {
	return routematch.New(&routematch.Request{Method: req.Method, Path: path, RawQuery: rawQuery, Host: req.Host, Header: req.Header}, routematch.EveryValue)
}

func selectHTTPRoute(routes []HTTPRoute, req *Request, path, rawQuery string, t *tracer) (*HTTPRoute, Reason) {
	m := matcherOf(req, path, rawQuery)
	var best *HTTPRoute
	var bestRank routematch.Rank
	for ri := range routes {
		r := &routes[ri]
		host, ok := m.Host(r.Hosts)
		if !ok {
			if t != nil {
				t.printf("route %s does not match host %q", r.Meta, req.Host)
			}
			continue
		}
		matched := false
		for _, rule := range r.Rules {
			if len(rule.Matches) == 0 {
				if rk := routematch.AnyRequest(host); best == nil || bestRank.Less(rk) {
					best, bestRank = r, rk
				}
				matched = true
				continue
			}
			for mi := range rule.Matches {
				rk, o := m.HTTP(host, &rule.Matches[mi])
				switch o {
				case routematch.NoMatch:
					continue
				case routematch.Ambiguous:
					if t != nil {
						t.printf("route %s matches on a header or query parameter whose repeated values disagree; the request is refused", r.Meta)
					}
					return nil, ReasonAmbiguousRequest
				}
				matched = true
				if best == nil || bestRank.Less(rk) {
					best, bestRank = r, rk
				}
			}
		}
		if !matched && t != nil {
			t.printf("route %s does not match the request", r.Meta)
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
	m := matcherOf(req, path, "")
	var best *GRPCRoute
	var bestRank routematch.Rank
	for ri := range routes {
		r := &routes[ri]
		host, ok := m.Host(r.Hosts)
		if !ok {
			continue
		}
		for _, rule := range r.Rules {
			if len(rule.Matches) == 0 {
				if rk := routematch.AnyCall(host); best == nil || bestRank.Less(rk) {
					best, bestRank = r, rk
				}
				continue
			}
			for mi := range rule.Matches {
				rk, o := m.GRPC(host, &rule.Matches[mi])
				switch o {
				case routematch.NoMatch:
					continue
				case routematch.Ambiguous:
					if t != nil {
						t.printf("route %s matches on a header whose repeated values disagree; the call is refused", r.Meta)
					}
					return nil, ReasonAmbiguousRequest
				}
				if best == nil || bestRank.Less(rk) {
					best, bestRank = r, rk
				}
			}
		}
	}
	if best == nil {
		if t != nil {
			t.printf("no gRPC route of the server matches %s %s", req.Method, path)
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
