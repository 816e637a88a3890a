package routematch

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
)

// Request is what matching reads of a request.
type Request struct {
	Method string
	// Path is the request path without the query; the inbound side
	// normalizes it first.
	Path string
	// RawQuery is the query without "?".
	RawQuery string
	// Host is the authority; a port and a trailing dot are ignored.
	Host   string
	Header http.Header
}

// Values is how a header or query parameter sent more than once, or as a
// comma-separated list, is read.
type Values uint8

const (
	// AnyValue: the condition holds when any one value equals it, as
	// Linkerd's proxy reads it. The outbound router uses it: choosing a
	// route grants nothing.
	AnyValue Values = iota
	// EveryValue: every value, counting each comma-separated element of
	// each line, must agree; when some match and others do not the
	// outcome is [Ambiguous], and so is a query that does not parse. The
	// inbound evaluator uses it and refuses such a request, since a
	// backend may read a different value than the one that matched.
	EveryValue
)

// Outcome is the result of testing a request against one match.
type Outcome uint8

// Outcomes.
const (
	NoMatch Outcome = iota
	Match
	// Ambiguous: with [EveryValue], the request's repeated values
	// disagree about a condition.
	Ambiguous
)

// Matcher tests one request against matches. It keeps what it parsed of
// the request (the query, the gRPC service and method) between calls.
// Make one per request with [New]; it is not safe for concurrent use.
type Matcher struct {
	req         *Request
	mode        Values
	query       url.Values
	queryErr    bool
	queryParsed bool
	rpcParsed   bool
	rpcOK       bool
	service     string
	rpc         string
}

// New returns a Matcher of req reading repeated values as mode says.
func New(req *Request, mode Values) Matcher {
	return Matcher{req: req, mode: mode}
}

// Host ranks the request's authority against a route's hosts. It reports
// false when the route lists hosts and none accepts the request.
func (m *Matcher) Host(hosts []Host) (Rank, bool) {
	if len(hosts) == 0 {
		return Rank{}, true
	}
	return m.hostRank(hosts)
}

func (m *Matcher) hostRank(hosts []Host) (Rank, bool) {
	var best Rank
	h := hostname(m.req.Host)
	found := false
	for _, hm := range hosts {
		v := strings.TrimSuffix(hm.Value, ".")
		var r Rank
		if hm.Suffix {
			if len(h) <= len(v)+1 || h[len(h)-len(v)-1] != '.' || !strings.EqualFold(h[len(h)-len(v):], v) {
				continue
			}
			r = hostRank(hostWild, len(v))
		} else {
			if !strings.EqualFold(h, v) {
				continue
			}
			r = hostRank(hostExact, len(v))
		}
		if !found || best.Less(r) {
			best, found = r, true
		}
	}
	return best, found
}

// hostname strips a port, IPv6 brackets and a trailing dot from an
// authority.
func hostname(host string) string {
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

// HTTP tests the request against an HTTP match of a route whose hosts
// ranked host.
func (m *Matcher) HTTP(host Rank, h *HTTP) (Rank, Outcome) {
	if h.Method != "" && m.req.Method != h.Method {
		return host, NoMatch
	}
	kind, n, ok := pathRank(h.Path, m.req.Path)
	if !ok {
		return host, NoMatch
	}
	if len(h.Headers) > 0 {
		if o := m.headers(h.Headers); o != Match {
			return host, o
		}
	}
	if len(h.Query) > 0 {
		if !m.queryParsed {
			q, err := url.ParseQuery(m.req.RawQuery)
			m.query, m.queryErr, m.queryParsed = q, err != nil, true
		}
		if m.queryErr && m.mode == EveryValue {
			return host, Ambiguous
		}
		for i := range h.Query {
			if o := m.values(&h.Query[i], m.query[h.Query[i].Name]); o != Match {
				return host, o
			}
		}
	}
	return host.withPath(kind, n).withConditions(h.Method != "", len(h.Headers), len(h.Query)), Match
}

// pathRank returns the kind and length a path condition ranks with, or
// false when it does not hold.
func pathRank(p *Path, path string) (uint64, int, bool) {
	if p == nil {
		return kindPrefix, 1, true
	}
	switch p.Kind {
	case PathExact:
		if path == p.Value {
			return kindExact, len(p.Value), true
		}
	case PathPrefix:
		// Whole segments only: "/foo" holds for "/foo", "/foo/" and
		// "/foo/bar", not for "/foobar".
		pfx := strings.TrimRight(p.Value, "/")
		if pfx == "" {
			return kindPrefix, 1, true
		}
		rest, ok := strings.CutPrefix(strings.TrimRight(path, "/"), pfx)
		if ok && (rest == "" || rest[0] == '/') {
			return kindPrefix, len(pfx), true
		}
	case PathRegex:
		if p.Regex != nil && p.Regex.MatchString(path) {
			return kindRegex, len(path), true
		}
	}
	return 0, 0, false
}

// GRPC tests the request against a gRPC match of a route whose hosts
// ranked host. A gRPC match holds only for a POST to /service/method.
func (m *Matcher) GRPC(host Rank, g *GRPC) (Rank, Outcome) {
	if !m.rpcParsed {
		m.service, m.rpc, m.rpcOK = splitRPC(m.req.Path)
		m.rpcOK = m.rpcOK && m.req.Method == http.MethodPost
		m.rpcParsed = true
	}
	if !m.rpcOK || g.Service != "" && g.Service != m.service || g.Method != "" && g.Method != m.rpc {
		return host, NoMatch
	}
	if len(g.Headers) > 0 {
		if o := m.headers(g.Headers); o != Match {
			return host, o
		}
	}
	return host.withRPC(len(g.Service), len(g.Method)).withConditions(false, len(g.Headers), 0), Match
}

// splitRPC reads "/service/method". The method is everything after the
// service's slash, so "/svc/m/x" is not method "m".
func splitRPC(path string) (service, method string, ok bool) {
	p, ok := strings.CutPrefix(path, "/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(p, "/")
}

func (m *Matcher) headers(vs []Value) Outcome {
	for i := range vs {
		var lines []string
		if m.req.Header != nil {
			lines = m.req.Header[textproto.CanonicalMIMEHeaderKey(vs[i].Name)]
		}
		if o := m.values(&vs[i], lines); o != Match {
			return o
		}
	}
	return Match
}

// values tests one condition against all the values a request sent for
// its name.
func (m *Matcher) values(v *Value, lines []string) Outcome {
	if m.mode == AnyValue {
		for _, l := range lines {
			if v.holds(l) {
				return Match
			}
		}
		return NoMatch
	}
	yes, no := false, false
	for _, l := range lines {
		if v.holds(l) {
			yes = true
		} else {
			no = true
		}
		if strings.IndexByte(l, ',') < 0 {
			continue
		}
		for rest := l; ; {
			elem, tail, more := strings.Cut(rest, ",")
			if v.holds(strings.TrimSpace(elem)) {
				yes = true
			} else {
				no = true
			}
			if !more {
				break
			}
			rest = tail
		}
	}
	switch {
	case yes && no:
		return Ambiguous
	case yes:
		return Match
	}
	return NoMatch
}

func (v *Value) holds(s string) bool {
	if v.Regex != nil {
		return v.Regex.MatchString(s)
	}
	return s == v.Exact
}
