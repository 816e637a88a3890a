package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/mesh/policy/authz"
	"github.com/weftmesh/weft/mesh/ports"
)

// Meshed says whether a workload runs a proxy that enforces policy.
type Meshed uint8

// Mesh states.
const (
	// MeshedUnknown: nothing in the objects says; policy is evaluated as
	// if the workload were meshed.
	MeshedUnknown Meshed = iota
	MeshedYes
	MeshedNo
)

type portPolicy struct {
	server *authz.Server
	// fromServer is the Server resource that selected the port, nil for
	// a default policy.
	fromServer *ObjectRef
}

type workloadPolicy struct {
	w             *Workload
	meshed        Meshed
	meshedWhy     string
	defaultPolicy DefaultPolicy
	defaultFrom   string
	ports         map[uint16]*portPolicy
	names         map[string][]uint16
	// defaults are the policies of ports neither a Server selects nor a
	// container declares: detect, opaque, and the same two in the
	// authenticated form (require-identity ports).
	defaults   [4]*authz.Server
	opaque     ports.Set
	opaqueFrom ports.Source
	requireID  ports.Set
}

func (wp *workloadPolicy) lookup(port uint16) *portPolicy {
	if pp, ok := wp.ports[port]; ok {
		return pp
	}
	return &portPolicy{server: wp.defaultFor(port)}
}

// defaultFor returns the default policy of a port no Server selects and no
// container declares.
func (wp *workloadPolicy) defaultFor(port uint16) *authz.Server {
	i := 0
	if wp.opaque.Contains(uint32(port)) {
		i = 1
	}
	if wp.requireID.Contains(uint32(port)) {
		i += 2
	}
	return wp.defaults[i]
}

// serverTemplate is the port policy a Server yields, before the probe
// routes of a particular workload are added.
type serverTemplate struct {
	spec   *serverSpec
	server authz.Server
	// explicitRoutes is true when HTTPRoutes are attached; then probes
	// get no automatic authorization.
	explicitRoutes bool
	// notAttached lists routes that name the Server but are not
	// attached, each with the reason.
	notAttached []string
}

// Index is the translation of one Objects snapshot: the policy of every
// port of every workload, and the problems found. It is immutable and
// safe for concurrent use.
type Index struct {
	cfg       *Config
	objs      *Objects
	workloads map[WorkloadRef]*workloadPolicy
	servers   map[ObjectRef]*serverTemplate
	problems  []Problem
	outbound  *outboundIndex
	// routeStatus is the status of every route, in the order of Objects.
	routeStatus []RouteStatus
	// egressStatus is the status of every EgressNetwork, in the order of
	// Objects.
	egressStatus []EgressNetworkStatus
}

// Problems returns the errors and warnings found while indexing, errors
// first.
func (ix *Index) Problems() []Problem { return ix.problems }

// Errors returns only the problems of SeverityError.
func (ix *Index) Errors() []Problem {
	var out []Problem
	for _, p := range ix.problems {
		if p.Severity == SeverityError {
			out = append(out, p)
		}
	}
	return out
}

// Build translates objs into an index. It never fails: invalid objects
// are ignored and reported as problems, as Linkerd's controller ignores
// them. cfg may be nil for the defaults.
func Build(objs *Objects, cfg *Config) *Index {
	if cfg == nil {
		cfg, _ = NewConfig()
	}
	if objs == nil {
		objs = &Objects{}
	}
	sorted := *objs
	sorted.Namespaces = append(sorted.Namespaces[:0:0], objs.Namespaces...)
	sorted.Workloads = append(sorted.Workloads[:0:0], objs.Workloads...)
	sorted.ServiceAccounts = append(sorted.ServiceAccounts[:0:0], objs.ServiceAccounts...)
	sorted.Services = append(sorted.Services[:0:0], objs.Services...)
	sorted.Servers = append(sorted.Servers[:0:0], objs.Servers...)
	sorted.ServerAuthorizations = append(sorted.ServerAuthorizations[:0:0], objs.ServerAuthorizations...)
	sorted.AuthorizationPolicies = append(sorted.AuthorizationPolicies[:0:0], objs.AuthorizationPolicies...)
	sorted.MeshTLSAuthentications = append(sorted.MeshTLSAuthentications[:0:0], objs.MeshTLSAuthentications...)
	sorted.NetworkAuthentications = append(sorted.NetworkAuthentications[:0:0], objs.NetworkAuthentications...)
	sorted.HTTPRoutes = append(sorted.HTTPRoutes[:0:0], objs.HTTPRoutes...)
	sorted.GatewayHTTPRoutes = append(sorted.GatewayHTTPRoutes[:0:0], objs.GatewayHTTPRoutes...)
	sorted.GRPCRoutes = append(sorted.GRPCRoutes[:0:0], objs.GRPCRoutes...)
	sorted.TCPRoutes = append(sorted.TCPRoutes[:0:0], objs.TCPRoutes...)
	sorted.TLSRoutes = append(sorted.TLSRoutes[:0:0], objs.TLSRoutes...)
	sorted.HTTPLocalRateLimitPolicies = append(sorted.HTTPLocalRateLimitPolicies[:0:0], objs.HTTPLocalRateLimitPolicies...)
	sorted.EgressNetworks = append(sorted.EgressNetworks[:0:0], objs.EgressNetworks...)
	sorted.sortAll()

	b := &builder{cfg: cfg, objs: &sorted, p: &problems{objs: objs}}
	ix := b.build()
	ix.objs = objs
	return ix
}

// Lookup returns the policy of a workload's port, as the Inbound API
// serves it, and false when the workload is unknown. It does not
// allocate for ports a Server selects or the workload declares.
func (ix *Index) Lookup(ref WorkloadRef, port uint16) (*authz.Server, bool) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return nil, false
	}
	if pp, ok := wp.ports[port]; ok {
		return pp.server, true
	}
	return wp.defaultFor(port), true
}

// ResolvePort turns a port number or container port name into a number.
// A name must be declared by a container of the workload; when several
// containers declare it, the lowest number is used.
func (ix *Index) ResolvePort(ref WorkloadRef, port intstr.IntOrString) (uint16, error) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return 0, fmt.Errorf("policy: workload %s not found", ref)
	}
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return 0, fmt.Errorf("policy: port %d is out of range 1-65535", port.IntVal)
		}
		return uint16(port.IntVal), nil
	}
	ps := wp.names[port.StrVal]
	if len(ps) == 0 {
		return 0, fmt.Errorf("policy: no container of %s declares a port named %q", ref, port.StrVal)
	}
	min := ps[0]
	for _, p := range ps {
		if p < min {
			min = p
		}
	}
	return min, nil
}
