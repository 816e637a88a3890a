package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/weftmesh/weft/apis/proxy/meta"
	"github.com/weftmesh/weft/apis/proxy/outbound"
	"github.com/weftmesh/weft/apis/proxy/tlsroute"
)

// Stream is how an outbound policy routes whole connections, from
// Gateway API TLSRoutes (ProxyProtocol.Tls: a route per SNI of the
// client's ClientHello) or a TCPRoute (ProxyProtocol.Opaque whose route is
// a resource: every connection). Each route's one rule sends a connection
// to a backend picked by weight. A Stream is not changed once compiled:
// connections share it.
type Stream struct {
	// TLS is true when routes are chosen by SNI.
	TLS    bool
	Routes []StreamRoute
}

// StreamRoute is one TLS or opaque route.
type StreamRoute struct {
	// Name names the route in logs ("tlsroute/shop/by-sni",
	// "tls-egress-deny").
	Name string
	// Meta is the route's metadata from the policy (its resource, or a
	// built-in route's name), for the route metrics.
	Meta *meta.Metadata
	// snis are the route's SNI matches; none matches every SNI, and a
	// connection without one.
	snis []sniMatch
	// Refuse, when set, is why the route's rule refuses every connection
	// (a Forbidden or Invalid filter).
	Refuse   string
	Backends []StreamBackend
	// first is true for FirstAvailable: the first backend takes every
	// connection; otherwise one is picked at random by weight.
	first bool
}

// StreamBackend is where a stream route sends a connection: a Service
// the proxy discovers (Authority), or one endpoint given directly
// (Forward: an EgressNetwork's original destination, in plaintext).
type StreamBackend struct {
	Name      string
	Weight    uint32
	Authority string
	Forward   *Endpoint
	// Refuse, when set, is why this backend refuses the connections its
	// weight gives it (an Invalid or Forbidden filter, or no backend the
	// proxy can connect to).
	Refuse string
}

// sniMatch is an exact name, or a suffix (".example.com") that a name
// must end with after at least one label of its own.
type sniMatch struct {
	exact  string
	suffix string
}

// CompileStream reads the stream routes of an outbound policy: its Tls
// protocol, or an Opaque protocol whose first route is a route resource
// (a TCPRoute). It returns nil for any other policy (HTTP, gRPC,
// detection, and an opaque protocol with only a built-in route), which
// the proxy serves as before. A stream route it cannot fully read is an
// error, and the caller refuses the connection rather than guess (a
// missing filter or backend is never read as "allow").
func CompileStream(pol *outbound.OutboundPolicy) (*Stream, error) {
	switch k := pol.GetProtocol().GetKind().(type) {
	case *outbound.ProxyProtocol_Tls_:
		s := &Stream{TLS: true}
		for i, r := range k.Tls.GetRoutes() {
			sr, err := compileTLSRoute(r)
			if err != nil {
				return nil, fmt.Errorf("route: tls route %d: %w", i, err)
			}
			s.Routes = append(s.Routes, sr)
		}
		return s, nil
	case *outbound.ProxyProtocol_Opaque_:
		routes := k.Opaque.GetRoutes()
		if len(routes) == 0 || routes[0].GetMetadata().GetResource() == nil {
			return nil, nil
		}
		// Opaque routes have nothing to match: the first one takes
		// every connection.
		sr, err := compileOpaqueRoute(routes[0])
		if err != nil {
			return nil, fmt.Errorf("route: opaque route: %w", err)
		}
		return &Stream{Routes: []StreamRoute{sr}}, nil
	}
	return nil, nil
}

func compileTLSRoute(r *outbound.TlsRoute) (StreamRoute, error) {
	sr := StreamRoute{Name: metaName(r.GetMetadata(), "tls"), Meta: r.GetMetadata()}
	for _, m := range r.GetSnis() {
		sm, err := compileSNI(m)
		if err != nil {
			return sr, err
		}
		sr.snis = append(sr.snis, sm)
	}
	rules := r.GetRules()
	if len(rules) != 1 {
		return sr, fmt.Errorf("%d rules, want 1", len(rules))
	}
	err := sr.readRule(tlsRule(rules[0]))
	return sr, err
}

func compileOpaqueRoute(r *outbound.OpaqueRoute) (StreamRoute, error) {
	sr := StreamRoute{Name: metaName(r.GetMetadata(), "opaque"), Meta: r.GetMetadata()}
	rules := r.GetRules()
	if len(rules) != 1 {
		return sr, fmt.Errorf("%d rules, want 1", len(rules))
	}
	err := sr.readRule(opaqueRule(rules[0]))
	return sr, err
}

// streamRule is the one rule of a TLS or opaque route, whatever its
// kind: the proto gives each kind types of its own with the same shape.
type streamRule struct {
	filters filterKinds
	// first is a FirstAvailable distribution, otherwise RandomAvailable
	// (weighted) or Empty; unknown is a distribution of no known kind.
	first, unknown bool
	backends       []ruleBackend
}

type ruleBackend struct {
	b       *outbound.Backend
	weight  uint32
	filters filterKinds
}

func tlsRule(rule *outbound.TlsRoute_Rule) streamRule {
	sr := streamRule{filters: tlsFilters(rule.GetFilters())}
	switch d := rule.GetBackends().GetKind().(type) {
	case *outbound.TlsRoute_Distribution_FirstAvailable_:
		sr.first = true
		for _, b := range d.FirstAvailable.GetBackends() {
			sr.backends = append(sr.backends, ruleBackend{b.GetBackend(), 1, tlsFilters(b.GetFilters())})
		}
	case *outbound.TlsRoute_Distribution_RandomAvailable_:
		for _, wb := range d.RandomAvailable.GetBackends() {
			sr.backends = append(sr.backends, ruleBackend{wb.GetBackend().GetBackend(), wb.GetWeight(), tlsFilters(wb.GetBackend().GetFilters())})
		}
	case *outbound.TlsRoute_Distribution_Empty_:
	default:
		sr.unknown = true
	}
	return sr
}

func opaqueRule(rule *outbound.OpaqueRoute_Rule) streamRule {
	sr := streamRule{filters: opaqueFilters(rule.GetFilters())}
	switch d := rule.GetBackends().GetKind().(type) {
	case *outbound.OpaqueRoute_Distribution_FirstAvailable_:
		sr.first = true
		for _, b := range d.FirstAvailable.GetBackends() {
			sr.backends = append(sr.backends, ruleBackend{b.GetBackend(), 1, opaqueFilters(b.GetFilters())})
		}
	case *outbound.OpaqueRoute_Distribution_RandomAvailable_:
		for _, wb := range d.RandomAvailable.GetBackends() {
			sr.backends = append(sr.backends, ruleBackend{wb.GetBackend().GetBackend(), wb.GetWeight(), opaqueFilters(wb.GetBackend().GetFilters())})
		}
	case *outbound.OpaqueRoute_Distribution_Empty_:
	default:
		sr.unknown = true
	}
	return sr
}

// readRule reads rule into r: its filters, then its backends.
func (r *StreamRoute) readRule(rule streamRule) error {
	for _, f := range rule.filters {
		why, err := streamFilter(f.invalid, f.message, f.forbidden)
		if err != nil {
			return err
		}
		r.Refuse = why
	}
	if rule.unknown {
		return errors.New("no backend distribution")
	}
	r.first = rule.first
	for _, rb := range rule.backends {
		sb, err := streamBackend(rb.b, rb.weight, rb.filters)
		if err != nil {
			return err
		}
		r.Backends = append(r.Backends, sb)
	}
	return nil
}

// filterKinds is a backend's filters as (invalid, message, forbidden)
// triples, whatever their route kind.
type filterKinds []struct {
	invalid   bool
	message   string
	forbidden bool
}

func tlsFilters(fs []*outbound.TlsRoute_Filter) filterKinds {
	out := make(filterKinds, len(fs))
	for i, f := range fs {
		out[i].invalid, out[i].message, out[i].forbidden = f.GetInvalid() != nil, f.GetInvalid().GetMessage(), f.GetForbidden() != nil
	}
	return out
}

func opaqueFilters(fs []*outbound.OpaqueRoute_Filter) filterKinds {
	out := make(filterKinds, len(fs))
	for i, f := range fs {
		out[i].invalid, out[i].message, out[i].forbidden = f.GetInvalid() != nil, f.GetInvalid().GetMessage(), f.GetForbidden() != nil
	}
	return out
}

// streamFilter reads one filter: Invalid and Forbidden refuse; a filter
// of any other kind (one this proxy does not know) is an error.
func streamFilter(invalid bool, message string, forbidden bool) (string, error) {
	switch {
	case invalid:
		if message == "" {
			message = "invalid backend"
		}
		return "invalid: " + message, nil
	case forbidden:
		return "forbidden", nil
	}
	return "", errors.New("a filter of unknown kind")
}

func streamBackend(b *outbound.Backend, weight uint32, filters filterKinds) (StreamBackend, error) {
	sb := StreamBackend{Name: metaName(b.GetMetadata(), "backend"), Weight: weight}
	for _, f := range filters {
		why, err := streamFilter(f.invalid, f.message, f.forbidden)
		if err != nil {
			return sb, err
		}
		sb.Refuse = why
	}
	switch k := b.GetKind().(type) {
	case *outbound.Backend_Balancer:
		path := k.Balancer.GetDiscovery().GetDst().GetPath()
		if path == "" {
			return sb, errors.New("a balancer without a destination path")
		}
		sb.Authority = path
	case *outbound.Backend_Forward:
		ep, err := endpointOf(k.Forward)
		if err != nil {
			return sb, err
		}
		sb.Forward = ep
	case nil:
		// Invalid backends come without one; anything else without one
		// cannot be connected to either.
		if sb.Refuse == "" {
			sb.Refuse = "invalid: no backend"
		}
	default:
		return sb, errors.New("a backend of unknown kind")
	}
	return sb, nil
}

func compileSNI(m *tlsroute.SniMatch) (sniMatch, error) {
	switch k := m.GetMatch().(type) {
	case *tlsroute.SniMatch_Exact:
		name := strings.ToLower(strings.TrimSuffix(k.Exact, "."))
		if name == "" {
			return sniMatch{}, errors.New("an empty exact SNI")
		}
		return sniMatch{exact: name}, nil
	case *tlsroute.SniMatch_Suffix_:
		labels := k.Suffix.GetReverseLabels()
		if len(labels) == 0 {
			return sniMatch{}, errors.New("an SNI suffix without labels")
		}
		var b strings.Builder
		for i := len(labels) - 1; i >= 0; i-- {
			l := strings.ToLower(labels[i])
			if l == "" || strings.Contains(l, ".") {
				return sniMatch{}, fmt.Errorf("SNI suffix label %q", labels[i])
			}
			b.WriteByte('.')
			b.WriteString(l)
		}
		return sniMatch{suffix: b.String()}, nil
	}
	return sniMatch{}, errors.New("an SNI match of unknown kind")
}

// Select returns the route of a connection whose ClientHello named sni
// ("" for none), or nil when no route matches (the connection is
// refused). Opaque streams have one route, which takes every connection.
// Among TLS routes, an exact SNI match wins over a suffix, a longer
// suffix over a shorter one, and any match over a route without SNIs;
// the first route wins a tie.
func (s *Stream) Select(sni string) *StreamRoute {
	if !s.TLS {
		if len(s.Routes) == 0 {
			return nil
		}
		return &s.Routes[0]
	}
	sni = strings.ToLower(strings.TrimSuffix(sni, "."))
	var best *StreamRoute
	bestScore := -1
	for i := range s.Routes {
		r := &s.Routes[i]
		score := -1
		if len(r.snis) == 0 {
			score = 0
		}
		for _, m := range r.snis {
			switch {
			case m.exact != "" && sni == m.exact:
				score = max(score, 1<<20)
			case m.suffix != "" && len(sni) > len(m.suffix) && strings.HasSuffix(sni, m.suffix):
				score = max(score, len(m.suffix))
			}
		}
		if score > bestScore {
			best, bestScore = r, score
		}
	}
	return best
}

// Pick returns the backend of one connection: the first one for
// FirstAvailable, else one at random by weight (a backend of weight 0
// never). It returns nil when there is none to pick.
func (r *StreamRoute) Pick() *StreamBackend {
	if len(r.Backends) == 0 {
		return nil
	}
	if r.first {
		return &r.Backends[0]
	}
	var total uint64
	for _, b := range r.Backends {
		total += uint64(b.Weight)
	}
	if total == 0 {
		return nil
	}
	n := rand.Uint64N(total)
	for i := range r.Backends {
		w := uint64(r.Backends[i].Weight)
		if n < w {
			return &r.Backends[i]
		}
		n -= w
	}
	return nil
}
