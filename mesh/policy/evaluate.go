package policy

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/ports"
)

// Client is the caller in an offline evaluation. Set exactly one of
// ServiceAccount (with Namespace), Identity, Unauthenticated, or TLS.
type Client struct {
	// ServiceAccount and Namespace name a meshed client; its identity is
	// formatted from the Config's trust domain and control-plane
	// namespace.
	ServiceAccount string
	Namespace      string
	// Identity is a meshed client's identity, written out.
	Identity string
	// Unauthenticated is a client without a mesh identity (not meshed).
	Unauthenticated bool
	// TLS is a client that speaks mesh TLS without presenting an
	// identity (what ServerAuthorization's unauthenticatedTLS admits).
	TLS bool
	// IP is the client's address. When unset, the client is taken to be a
	// pod inside the cluster: the first address of the first cluster
	// network.
	IP netip.Addr
}

// Validate checks that exactly one kind of client is given.
func (c Client) Validate() error {
	n := 0
	if c.ServiceAccount != "" || c.Namespace != "" {
		n++
		if c.ServiceAccount == "" || c.Namespace == "" {
			return fmt.Errorf("policy: a service-account client needs both serviceAccount and namespace")
		}
	}
	if c.Identity != "" {
		n++
		if _, suffix, err := authz.ParseIdentity(c.Identity); err != nil || suffix {
			return fmt.Errorf("policy: client identity %q is not a valid identity name", c.Identity)
		}
	}
	if c.Unauthenticated {
		n++
	}
	if c.TLS {
		n++
	}
	if n != 1 {
		return fmt.Errorf("policy: give exactly one of serviceAccount+namespace, identity, unauthenticated, or tls (got %d)", n)
	}
	return nil
}

// Request is one offline question: may this client reach this workload's
// port (and send this HTTP request)?
type Request struct {
	Workload WorkloadRef
	// Port is a number or a container port name.
	Port   intstr.IntOrString
	Client Client
	// HTTP is nil for a plain connection.
	HTTP *authz.Request
}

// Result is the answer to a Request.
type Result struct {
	authz.Result
	Workload WorkloadRef
	Port     uint16
	// Meshed says whether a proxy enforces policy on the workload. When
	// it is MeshedNo the decision is Allow with ReasonUnenforced.
	Meshed Meshed
	// Conn is the client as evaluated.
	Conn authz.Conn
	// RateLimit is set when the port's Server has an
	// HTTPLocalRateLimitPolicy and the request is admitted: the limits
	// that count it.
	RateLimit *RateLimitInfo
}

// ReasonUnenforced is the Reason of an Allow for a workload without a
// proxy: nothing enforces policy there.
const ReasonUnenforced = "unenforced"

// ReasonString returns the decision's reason class, including
// "unenforced".
func (r *Result) ReasonString() string {
	if r.Meshed == MeshedNo {
		return ReasonUnenforced
	}
	return r.Reason.String()
}

// Explanation is a Result with the reasoning behind it.
type Explanation struct {
	Result
	Steps []string
}

// String renders the explanation as indented lines.
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "decision: %s (%s)\n", e.Decision, e.ReasonString())
	for _, s := range e.Steps {
		b.WriteString("  ")
		b.WriteString(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// DefaultClientIP is the address given to clients without one: the first
// host address of the first cluster network.
func (c *Config) DefaultClientIP() netip.Addr {
	if len(c.ClusterNetworks) == 0 {
		return netip.MustParseAddr("10.0.0.1")
	}
	return c.ClusterNetworks[0].Masked().Addr().Next()
}

// Conn turns a Client into what the proxy would see.
func (c *Config) Conn(cl Client) authz.Conn {
	conn := authz.Conn{IP: cl.IP}
	if !conn.IP.IsValid() {
		conn.IP = c.DefaultClientIP()
	}
	// A client given a loopback address is the workload's own process:
	// always allowed, as by the proxy. The default address never is.
	conn.Loopback = cl.IP.IsValid() && cl.IP.IsLoopback()
	switch {
	case cl.Identity != "":
		conn.TLS, conn.Identity = true, cl.Identity
	case cl.ServiceAccount != "":
		conn.TLS, conn.Identity = true, c.ServiceAccountIdentity(cl.ServiceAccount, cl.Namespace)
	case cl.TLS:
		conn.TLS = true
	}
	return conn
}

// Evaluate answers a Request. It fails only when the workload or port
// name is unknown.
func (ix *Index) Evaluate(r Request) (Result, error) {
	res, _, err := ix.evaluate(r, false)
	return res, err
}

// Explain answers a Request and says why, step by step.
func (ix *Index) Explain(r Request) (Explanation, error) {
	res, steps, err := ix.evaluate(r, true)
	return Explanation{Result: res, Steps: steps}, err
}

func (ix *Index) evaluate(r Request, explain bool) (Result, []string, error) {
	res := Result{Workload: r.Workload}
	wp, ok := ix.workloads[r.Workload]
	if !ok {
		return res, nil, fmt.Errorf("policy: workload %s not found in the objects", r.Workload)
	}
	port, err := ix.ResolvePort(r.Workload, r.Port)
	if err != nil {
		return res, nil, err
	}
	res.Port = port
	res.Meshed = wp.meshed
	res.Conn = ix.cfg.Conn(r.Client)
	pp := wp.lookup(port)
	var steps []string
	if explain {
		steps = append(steps, fmt.Sprintf("workload: %s %s/%s, service account %s", wp.w.Kind, wp.w.Namespace, wp.w.Name, wp.w.ServiceAccount))
		portDesc := fmt.Sprint(port)
		if r.Port.Type == intstr.String {
			portDesc = fmt.Sprintf("%d (%s)", port, r.Port.StrVal)
		}
		if pp.fromServer != nil {
			steps = append(steps, fmt.Sprintf("port %s is selected by %s", portDesc, pp.fromServer))
			if t := ix.servers[*pp.fromServer]; t != nil {
				steps = append(steps, t.notAttached...)
			}
		} else {
			opaque := ""
			if pp.server.Protocol == authz.ProtocolOpaque {
				opaque = "; the port is opaque (" + opaqueWhy(wp) + ")"
			}
			steps = append(steps, fmt.Sprintf("no Server selects port %s: the default policy %s applies (from %s)%s",
				portDesc, wp.defaultPolicy, wp.defaultFrom, opaque))
		}
	}
	if wp.meshed == MeshedNo {
		res.Result = authz.Result{Decision: authz.Allow, Server: pp.server}
		if explain {
			steps = append(steps, "the workload is not meshed ("+wp.meshedWhy+"): no proxy enforces policy, so every client gets through")
		}
		return res, steps, nil
	}
	if explain && !r.Client.IP.IsValid() {
		steps = append(steps, fmt.Sprintf("client address not given: assuming %s, inside cluster network %s", res.Conn.IP, ix.cfg.ClusterNetworks[0]))
	}
	if explain && wp.meshed == MeshedUnknown {
		steps = append(steps, "note: "+wp.meshedWhy+"; policy is evaluated as if it were")
	}
	if explain {
		e := authz.Explain(pp.server, res.Conn, r.HTTP)
		res.Result = e.Result
		steps = append(steps, e.Steps...)
		if res.RateLimit = rateLimitFor(pp.server, &res); res.RateLimit != nil {
			steps = append(steps, res.RateLimit.String(res.Conn.Identity))
		}
		return res, steps, nil
	}
	res.Result = authz.Evaluate(pp.server, res.Conn, r.HTTP)
	res.RateLimit = rateLimitFor(pp.server, &res)
	return res, steps, nil
}

// opaqueWhy says where a workload's opaque ports come from.
func opaqueWhy(wp *workloadPolicy) string {
	switch wp.opaqueFrom {
	case ports.FromObject:
		return vocab.AnnotationOpaquePorts + " on the workload"
	case ports.FromNamespace:
		return vocab.AnnotationOpaquePorts + " on namespace " + wp.w.Namespace
	}
	return "a default opaque port that a container declares"
}
