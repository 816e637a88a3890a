package authz

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

// Conn describes the client side of an inbound connection as the proxy
// sees it.
type Conn struct {
	// IP is the client's address (the socket peer). An invalid address is
	// in no network.
	IP netip.Addr
	// TLS is true when the connection came over mesh TLS terminated by the
	// proxy.
	TLS bool
	// Identity is the client's verified mesh identity, empty when it
	// presented none. It counts only when TLS is true.
	Identity string
	// Loopback is true when the client is one of the workload's own
	// processes, connecting over the loopback interface (127.0.0.0/8 or
	// ::1 inside the workload's network namespace). Such a client is
	// always allowed, whatever the policy, as Linkerd's proxy lets it
	// through. The caller decides: the proxy sets it only where loopback
	// belongs to the workload alone (a pod), never from anything the
	// client sends.
	Loopback bool
}

// Request is the part of an HTTP request that policy reads.
type Request struct {
	// Method is the request method ("GET").
	Method string
	// Path is the request target in origin form as received, not decoded:
	// the path and an optional "?query" (http.Request.RequestURI, or the
	// HTTP/2 :path).
	Path string
	// Host is the request's authority (Host header or :authority), with or
	// without a port.
	Host string
	// Header holds the request headers; keys in canonical form as
	// net/http stores them.
	Header http.Header
}

// Decision is the outcome of an evaluation. The zero value is Deny.
type Decision uint8

// Decisions.
const (
	Deny Decision = iota
	Allow
	// Audit: nothing but an audit policy admitted the traffic; it is let
	// through and reported.
	Audit
)

// String returns "allow", "deny" or "audit".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Audit:
		return "audit"
	}
	return "deny"
}

// ParseDecision reads "allow", "deny" or "audit".
func ParseDecision(s string) (Decision, error) {
	switch s {
	case "allow":
		return Allow, nil
	case "deny":
		return Deny, nil
	case "audit":
		return Audit, nil
	}
	return Deny, fmt.Errorf("authz: unknown decision %q (want allow, deny or audit)", s)
}

// Reason classifies a decision; the proxy may put it in a response header.
type Reason uint8

// Reasons.
const (
	// ReasonNone is the zero value: nothing was evaluated.
	ReasonNone Reason = iota
	// ReasonAuthorized: an authorization admitted the client.
	ReasonAuthorized
	// ReasonAudited: only an audit policy admitted the client.
	ReasonAudited
	// ReasonUnauthorized: no authorization admitted the client.
	ReasonUnauthorized
	// ReasonNoRoute: the request matched no route of the server.
	ReasonNoRoute
	// ReasonInvalidPath: the request path is ambiguous or malformed
	// (see package pathnorm).
	ReasonInvalidPath
	// ReasonAmbiguousRequest: a header or query parameter that a route
	// matches on was repeated with values that disagree.
	ReasonAmbiguousRequest
	// ReasonNoPolicy: there was no policy to evaluate (nil server).
	ReasonNoPolicy
	// ReasonLoopback: the client is the workload itself, over loopback
	// (Conn.Loopback); it is allowed whatever the policy.
	ReasonLoopback
)

var reasonNames = [...]string{"none", "authorized", "audited", "unauthorized", "no-route", "invalid-path", "ambiguous-request", "no-policy", "loopback"}

// String returns a short, stable class name such as "unauthorized".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Result is the outcome of Evaluate. Its pointers point into the Server
// that was evaluated; building a Result allocates nothing.
type Result struct {
	Decision Decision
	Reason   Reason
	// Server is the evaluated policy.
	Server *Server
	// HTTPRoute or GRPCRoute is the route that matched, if any.
	HTTPRoute *HTTPRoute
	GRPCRoute *GRPCRoute
	// Authorization is the authorization that admitted the client (also
	// for Audit: the audit authorization).
	Authorization *Authorization
	// Path is the normalized request path, empty for connections.
	Path string
}

// Route returns the metadata of the matched route, if any.
func (r *Result) Route() (Meta, bool) {
	switch {
	case r.HTTPRoute != nil:
		return r.HTTPRoute.Meta, true
	case r.GRPCRoute != nil:
		return r.GRPCRoute.Meta, true
	}
	return Meta{}, false
}

// Evaluate decides whether the client may open a connection (req == nil)
// or send an HTTP request (req != nil) to the port whose policy is s. It
// is pure and safe for concurrent use; it does not allocate for
// connections or for requests whose path is already normalized.
//
// For a request on an HTTP port the path is normalized first (an invalid
// path is denied), then the best route is chosen as Linkerd and the
// Gateway API do (host, then path length, method, header and query
// match counts, then route order), and the client must be admitted by one
// of the route's authorizations or the server's. On opaque and TLS ports
// a request is evaluated as a connection. Audit authorizations are tried
// last.
func Evaluate(s *Server, c Conn, req *Request) Result {
	return evaluate(s, c, req, nil)
}

// Explanation is a Result with the reasoning behind it, for people.
type Explanation struct {
	Result
	// Steps are the lines of reasoning, in order.
	Steps []string
}

// Explain evaluates like Evaluate and records why: the route chosen and
// routes passed over, each authorization tried and why it did or did not
// admit the client. Its decision always equals Evaluate's.
func Explain(s *Server, c Conn, req *Request) Explanation {
	t := &tracer{}
	res := evaluate(s, c, req, t)
	return Explanation{Result: res, Steps: t.lines}
}

// String renders the explanation as indented lines.
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s (%s)\n", e.Decision, e.Reason)
	for _, l := range e.Steps {
		b.WriteString("  ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

type tracer struct{ lines []string }

func (t *tracer) printf(format string, args ...any) {
	if t != nil {
		t.lines = append(t.lines, fmt.Sprintf(format, args...))
	}
}

func evaluate(s *Server, c Conn, req *Request, t *tracer) Result {
	if c.Loopback {
		return loopback(s, c, req, t)
	}
	if s == nil {
		if t != nil {
			t.printf("no policy for the port")
		}
		return Result{Reason: ReasonNoPolicy}
	}
	res := Result{Server: s}
	if t != nil {
		t.printf("server: %s (protocol %s)", s.Meta, s.Protocol)
		t.printf("client: %s", describeConn(c))
	}
	var routeAuthz []Authorization
	if req != nil && s.Protocol.IsHTTP() {
		raw, rawQuery, err := pathnorm.SplitTarget(req.Path)
		var path string
		if err == nil {
			path, err = pathnorm.Normalize(raw)
		}
		if err != nil {
			if t != nil {
				t.printf("request path %q refused: %v", req.Path, err)
			}
			res.Reason = ReasonInvalidPath
			return res
		}
		res.Path = path
		if t != nil {
			if path != raw {
				t.printf("request: %s %s (normalized from %q)", req.Method, path, raw)
			} else {
				t.printf("request: %s %s", req.Method, path)
			}
		}
		if s.Protocol == ProtocolGRPC {
			r, reason := selectGRPCRoute(s.GRPCRoutes, req, path, t)
			if r == nil {
				res.Reason = reason
				return res
			}
			res.GRPCRoute = r
			routeAuthz = r.Authorizations
		} else {
			r, reason := selectHTTPRoute(s.HTTPRoutes, req, path, rawQuery, t)
			if r == nil {
				res.Reason = reason
				return res
			}
			res.HTTPRoute = r
			routeAuthz = r.Authorizations
		}
	} else if req != nil {
		if t != nil {
			t.printf("the port is %s: the request is evaluated as a connection", s.Protocol)
		}
	}

	// Real authorizations first, then audit ones.
	for pass := 0; pass < 2; pass++ {
		audit := pass == 1
		for _, list := range [2][]Authorization{routeAuthz, s.Authorizations} {
			for i := range list {
				a := &list[i]
				if a.Audit != audit {
					continue
				}
				if admits(a, c, t) {
					res.Authorization = a
					if audit {
						res.Decision, res.Reason = Audit, ReasonAudited
					} else {
						res.Decision, res.Reason = Allow, ReasonAuthorized
					}
					return res
				}
			}
		}
	}
	if t != nil && len(routeAuthz) == 0 && len(s.Authorizations) == 0 {
		t.printf("no authorization applies to this server or route, so every client is denied")
	}
	res.Reason = ReasonUnauthorized
	return res
}

// loopback allows a client that is the workload itself. The path is
// still normalized when it can be, so that the proxy forwards the same
// form it would for anyone else.
func loopback(s *Server, c Conn, req *Request, t *tracer) Result {
	res := Result{Decision: Allow, Reason: ReasonLoopback, Server: s}
	if req != nil && s != nil && s.Protocol.IsHTTP() {
		if raw, _, err := pathnorm.SplitTarget(req.Path); err == nil {
			if path, err := pathnorm.Normalize(raw); err == nil {
				res.Path = path
			}
		}
	}
	if t != nil {
		if s != nil {
			t.printf("server: %s (protocol %s)", s.Meta, s.Protocol)
		}
		t.printf("client: %s", describeConn(c))
		t.printf("the client is on loopback (%s): the workload's own processes are always allowed, whatever the policy, as Linkerd's proxy allows them", c.IP)
	}
	return res
}

func describeConn(c Conn) string {
	ip := "unknown address"
	if c.IP.IsValid() {
		ip = c.IP.String()
	}
	switch {
	case c.TLS && c.Identity != "":
		return fmt.Sprintf("identity %s over mesh TLS from %s", c.Identity, ip)
	case c.TLS:
		return "mesh TLS without identity from " + ip
	}
	return "unauthenticated (no mesh TLS) from " + ip
}

// admits reports whether a admits c.
func admits(a *Authorization, c Conn, t *tracer) bool {
	inNet := false
	for i := range a.Networks {
		if a.Networks[i].Contains(c.IP) {
			inNet = true
			break
		}
	}
	ok := authenticates(&a.Authentication, c)
	if t != nil {
		why := authnWhy(&a.Authentication, c, ok)
		label := a.Meta.String()
		if len(a.Sources) > 0 {
			srcs := make([]string, len(a.Sources))
			for i, s := range a.Sources {
				srcs[i] = s.String()
			}
			label += " (via " + strings.Join(srcs, ", ") + ")"
		}
		switch {
		case inNet && ok && a.Audit:
			t.printf("%s admits %s in audit mode: allowed and reported", label, a.Authentication)
		case inNet && ok:
			t.printf("%s admits the client: %s", label, why)
		case !inNet:
			t.printf("%s does not apply: client address %s is not in %s", label, addrString(c.IP), networksString(a.Networks))
		default:
			t.printf("%s does not apply: %s", label, why)
		}
	}
	return inNet && ok
}

func addrString(ip netip.Addr) string {
	if !ip.IsValid() {
		return "(unknown)"
	}
	return ip.Unmap().String()
}

func networksString(ns []Network) string {
	if len(ns) == 0 {
		return "no network"
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = n.String()
	}
	return strings.Join(parts, ", ")
}

// authenticates reports whether the connection satisfies a. It does not
// allocate; authnWhy explains the outcome for tracing.
func authenticates(a *Authentication, c Conn) bool {
	switch a.Kind {
	case Unauthenticated:
		return true
	case TLSUnauthenticated:
		return c.TLS
	case TLSAuthenticated:
		if !c.TLS || c.Identity == "" {
			return false
		}
		for _, id := range a.Identities {
			if id == c.Identity {
				return true
			}
		}
		for _, s := range a.Suffixes {
			if suffixMatch(c.Identity, s) {
				return true
			}
		}
	}
	return false
}

func authnWhy(a *Authentication, c Conn, ok bool) string {
	switch a.Kind {
	case Unauthenticated:
		return "any client is allowed"
	case TLSUnauthenticated:
		if ok {
			return "the client uses mesh TLS"
		}
		return "it requires mesh TLS and the client is not meshed"
	case TLSAuthenticated:
		if !c.TLS || c.Identity == "" {
			return "it requires a mesh identity and the client has none"
		}
		if ok {
			return "identity " + c.Identity + " matches " + a.String()
		}
		return "identity " + c.Identity + " is not among " + a.String()
	}
	return "unknown authentication"
}

func suffixMatch(id, suffix string) bool {
	if suffix == "" {
		return id != ""
	}
	return len(id) > len(suffix)+1 && id[len(id)-len(suffix)-1] == '.' && strings.HasSuffix(id, suffix)
}
