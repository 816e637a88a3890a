package tap

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/apis/proxy/httptypes"
	ptap "github.com/weftmesh/weft/apis/proxy/tap"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// A tap's match is compiled from the ObserveRequest once, checked for
// what Linkerd's proxy refuses (an empty predicate, a port outside
// 1..65535 or a reversed range, a bad netmask, an empty label, an unknown
// method or scheme) and bounded in size, then evaluated for every request
// while the tap is open.

// Bounds of a compiled match, against a tapper sending a huge predicate.
const (
	maxMatchDepth = 32
	maxMatchNodes = 512
)

// errInvalidMatch is wrapped by every match compilation error.
var errInvalidMatch = errors.New("dataplane: invalid tap match")

type matchKind int

const (
	matchAll matchKind = iota
	matchAny
	matchNot
	matchSource
	matchDestination
	matchDestinationLabel
	matchRouteLabel
	matchScheme
	matchMethod
	matchAuthority
	matchPath
)

// matcher is a compiled predicate.
type matcher struct {
	kind     matchKind
	subs     []*matcher // all, any, not (one)
	net      netip.Prefix
	min, max uint16 // port range; a valid net takes precedence
	key, val string // label key and value; scheme or method in val
	prefix   bool   // authority and path: prefix rather than exact
}

// compileMatch compiles m, which is required (Linkerd's proxy refuses a
// tap without one; all{} matches every request).
func compileMatch(m *ptap.ObserveRequest_Match) (*matcher, error) {
	nodes := 0
	return compileNode(m, 0, &nodes)
}

func compileNode(m *ptap.ObserveRequest_Match, depth int, nodes *int) (*matcher, error) {
	if m == nil || m.GetMatch() == nil {
		return nil, fmt.Errorf("%w: a predicate is missing", errInvalidMatch)
	}
	*nodes++
	if depth > maxMatchDepth || *nodes > maxMatchNodes {
		return nil, fmt.Errorf("%w: more than %d levels or %d predicates", errInvalidMatch, maxMatchDepth, maxMatchNodes)
	}
	seq := func(kind matchKind, s *ptap.ObserveRequest_Match_Seq) (*matcher, error) {
		out := &matcher{kind: kind}
		for _, sub := range s.GetMatches() {
			if sub.GetMatch() == nil {
				continue // an empty entry is skipped, as Linkerd's proxy does
			}
			c, err := compileNode(sub, depth+1, nodes)
			if err != nil {
				return nil, err
			}
			out.subs = append(out.subs, c)
		}
		return out, nil
	}
	switch v := m.GetMatch().(type) {
	case *ptap.ObserveRequest_Match_All:
		return seq(matchAll, v.All)
	case *ptap.ObserveRequest_Match_Any:
		return seq(matchAny, v.Any)
	case *ptap.ObserveRequest_Match_Not:
		c, err := compileNode(v.Not, depth+1, nodes)
		if err != nil {
			return nil, err
		}
		return &matcher{kind: matchNot, subs: []*matcher{c}}, nil
	case *ptap.ObserveRequest_Match_Source:
		return compileTCP(matchSource, v.Source)
	case *ptap.ObserveRequest_Match_Destination:
		return compileTCP(matchDestination, v.Destination)
	case *ptap.ObserveRequest_Match_DestinationLabel:
		return compileLabel(matchDestinationLabel, v.DestinationLabel)
	case *ptap.ObserveRequest_Match_RouteLabel:
		return compileLabel(matchRouteLabel, v.RouteLabel)
	case *ptap.ObserveRequest_Match_Http_:
		return compileHTTP(v.Http)
	}
	return nil, fmt.Errorf("%w: unknown predicate", errInvalidMatch)
}

func compileLabel(kind matchKind, l *ptap.ObserveRequest_Match_Label) (*matcher, error) {
	if l.GetKey() == "" || l.GetValue() == "" {
		return nil, fmt.Errorf("%w: a label predicate needs a key and a value", errInvalidMatch)
	}
	return &matcher{kind: kind, key: l.GetKey(), val: l.GetValue()}, nil
}

func compileTCP(kind matchKind, t *ptap.ObserveRequest_Match_Tcp) (*matcher, error) {
	switch v := t.GetMatch().(type) {
	case *ptap.ObserveRequest_Match_Tcp_Ports:
		lo, hi := v.Ports.GetMin(), v.Ports.GetMax()
		if lo == 0 {
			lo = hi
		}
		if hi == 0 {
			hi = lo
		}
		switch {
		case lo == 0:
			return nil, fmt.Errorf("%w: a port range needs a bound", errInvalidMatch)
		case hi > 65535:
			return nil, fmt.Errorf("%w: port %d is out of range", errInvalidMatch, hi)
		case lo > hi:
			return nil, fmt.Errorf("%w: port range %d-%d is reversed", errInvalidMatch, lo, hi)
		}
		return &matcher{kind: kind, min: uint16(lo), max: uint16(hi)}, nil
	case *ptap.ObserveRequest_Match_Tcp_Netmask_:
		ip, err := authz.AddrFromProto(v.Netmask.GetIp())
		if err != nil {
			return nil, fmt.Errorf("%w: netmask address: %w", errInvalidMatch, err)
		}
		mask := v.Netmask.GetMask()
		if mask == 0 || mask > uint32(ip.BitLen()) {
			return nil, fmt.Errorf("%w: netmask length %d for a %d-bit address", errInvalidMatch, mask, ip.BitLen())
		}
		pfx, err := ip.Prefix(int(mask))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errInvalidMatch, err)
		}
		return &matcher{kind: kind, net: pfx}, nil
	}
	return nil, fmt.Errorf("%w: a TCP predicate needs ports or a netmask", errInvalidMatch)
}

func compileHTTP(h *ptap.ObserveRequest_Match_Http) (*matcher, error) {
	str := func(kind matchKind, s *ptap.ObserveRequest_Match_Http_StringMatch) (*matcher, error) {
		switch v := s.GetMatch().(type) {
		case *ptap.ObserveRequest_Match_Http_StringMatch_Exact:
			return &matcher{kind: kind, val: v.Exact}, nil
		case *ptap.ObserveRequest_Match_Http_StringMatch_Prefix:
			return &matcher{kind: kind, val: v.Prefix, prefix: true}, nil
		}
		return nil, fmt.Errorf("%w: a string predicate needs exact or prefix", errInvalidMatch)
	}
	switch v := h.GetMatch().(type) {
	case *ptap.ObserveRequest_Match_Http_Scheme:
		s, err := schemeName(v.Scheme)
		if err != nil {
			return nil, err
		}
		return &matcher{kind: matchScheme, val: s}, nil
	case *ptap.ObserveRequest_Match_Http_Method:
		m, err := methodName(v.Method)
		if err != nil {
			return nil, err
		}
		return &matcher{kind: matchMethod, val: m}, nil
	case *ptap.ObserveRequest_Match_Http_Authority:
		return str(matchAuthority, v.Authority)
	case *ptap.ObserveRequest_Match_Http_Path:
		return str(matchPath, v.Path)
	}
	return nil, fmt.Errorf("%w: an HTTP predicate is missing", errInvalidMatch)
}

// methodNames are the registered methods by their enum number.
var methodNames = map[httptypes.HttpMethod_Registered]string{
	httptypes.HttpMethod_GET: "GET", httptypes.HttpMethod_POST: "POST", httptypes.HttpMethod_PUT: "PUT",
	httptypes.HttpMethod_DELETE: "DELETE", httptypes.HttpMethod_PATCH: "PATCH", httptypes.HttpMethod_OPTIONS: "OPTIONS",
	httptypes.HttpMethod_CONNECT: "CONNECT", httptypes.HttpMethod_HEAD: "HEAD", httptypes.HttpMethod_TRACE: "TRACE",
}

func methodName(m *httptypes.HttpMethod) (string, error) {
	switch v := m.GetType().(type) {
	case *httptypes.HttpMethod_Registered_:
		if n, ok := methodNames[v.Registered]; ok {
			return n, nil
		}
		return "", fmt.Errorf("%w: unknown method %d", errInvalidMatch, v.Registered)
	case *httptypes.HttpMethod_Unregistered:
		if v.Unregistered == "" {
			return "", fmt.Errorf("%w: empty method", errInvalidMatch)
		}
		return v.Unregistered, nil
	}
	return "", fmt.Errorf("%w: a method is missing", errInvalidMatch)
}

func schemeName(s *httptypes.Scheme) (string, error) {
	switch v := s.GetType().(type) {
	case *httptypes.Scheme_Registered_:
		switch v.Registered {
		case httptypes.Scheme_HTTP:
			return "http", nil
		case httptypes.Scheme_HTTPS:
			return "https", nil
		}
		return "", fmt.Errorf("%w: unknown scheme %d", errInvalidMatch, v.Registered)
	case *httptypes.Scheme_Unregistered:
		if v.Unregistered == "" {
			return "", fmt.Errorf("%w: empty scheme", errInvalidMatch)
		}
		return strings.ToLower(v.Unregistered), nil
	}
	return "", fmt.Errorf("%w: a scheme is missing", errInvalidMatch)
}

// matches evaluates the predicate against one request.
func (m *matcher) matches(v *View) bool {
	switch m.kind {
	case matchAll:
		for _, s := range m.subs {
			if !s.matches(v) {
				return false
			}
		}
		return true
	case matchAny:
		for _, s := range m.subs {
			if s.matches(v) {
				return true
			}
		}
		return false
	case matchNot:
		return !m.subs[0].matches(v)
	case matchSource:
		return m.matchAddr(v.Src)
	case matchDestination:
		return m.matchAddr(v.Dst)
	case matchDestinationLabel:
		return v.dstLabelIs(m.key, m.val)
	case matchRouteLabel:
		return m.key == "route" && v.Route != "" && v.Route == m.val
	case matchScheme:
		return v.Scheme == m.val
	case matchMethod:
		return v.Method == m.val
	case matchAuthority:
		return m.matchString(v.Authority)
	case matchPath:
		return m.matchString(v.Path)
	}
	return false
}

func (m *matcher) matchAddr(a netip.AddrPort) bool {
	if !a.IsValid() {
		return false
	}
	if m.net.IsValid() {
		return m.net.Contains(a.Addr().Unmap()) || m.net.Contains(a.Addr())
	}
	return m.min <= a.Port() && a.Port() <= m.max
}

func (m *matcher) matchString(s string) bool {
	if m.prefix {
		return strings.HasPrefix(s, m.val)
	}
	return s == m.val
}
