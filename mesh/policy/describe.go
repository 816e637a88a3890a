package policy

import (
	"fmt"
	"sort"

	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// PortInfo describes the policy of one port of a workload, for `weft
// authz` and other listings.
type PortInfo struct {
	Port uint16
	// Name is the container port name, if any.
	Name string
	// Server is the port's policy.
	Server *authz.Server
	// FromServer is the Server resource that selects the port; nil when
	// the default policy applies.
	FromServer *ObjectRef
	// DefaultPolicy and DefaultFrom say which default applies and why,
	// when FromServer is nil.
	DefaultPolicy DefaultPolicy
	DefaultFrom   string
}

// WorkloadInfo describes a workload's policy.
type WorkloadInfo struct {
	Workload  *Workload
	Meshed    Meshed
	MeshedWhy string
	// DefaultPolicy applies to ports no Server selects.
	DefaultPolicy DefaultPolicy
	DefaultFrom   string
	// Ports lists the ports Servers select and the ports containers
	// declare, sorted.
	Ports []PortInfo
}

// Describe lists the policies that apply to a workload.
func (ix *Index) Describe(ref WorkloadRef) (WorkloadInfo, error) {
	wp, ok := ix.workloads[ref]
	if !ok {
		return WorkloadInfo{}, fmt.Errorf("policy: workload %s not found", ref)
	}
	info := WorkloadInfo{Workload: wp.w, Meshed: wp.meshed, MeshedWhy: wp.meshedWhy, DefaultPolicy: wp.defaultPolicy, DefaultFrom: wp.defaultFrom}
	_, numbers := containerPorts(wp.w)
	for port, pp := range wp.ports {
		pi := PortInfo{Port: port, Name: numbers[port], Server: pp.server, FromServer: pp.fromServer}
		if pp.fromServer == nil {
			pi.DefaultPolicy, pi.DefaultFrom = wp.defaultPolicy, wp.defaultFrom
			if pp.server.Meta.Default != wp.defaultPolicy.String() {
				if d, err := ParseDefaultPolicy(pp.server.Meta.Default); err == nil {
					pi.DefaultPolicy, pi.DefaultFrom = d, vocab.AnnotationRequireIdentityInboundPorts
				}
			}
		}
		info.Ports = append(info.Ports, pi)
	}
	sort.Slice(info.Ports, func(i, j int) bool { return info.Ports[i].Port < info.Ports[j].Port })
	return info, nil
}
