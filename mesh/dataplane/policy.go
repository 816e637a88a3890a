package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/weftmesh/weft/apis/proxy/inbound"
	"github.com/weftmesh/weft/apis/vocab"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

// Default inbound policy names, as Linkerd spells them
// (config.linkerd.io/default-inbound-policy).
const (
	AllUnauthenticated     = "all-unauthenticated"
	AllAuthenticated       = "all-authenticated"
	ClusterUnauthenticated = "cluster-unauthenticated"
	ClusterAuthenticated   = "cluster-authenticated"
	DenyAll                = "deny"
	AuditAll               = "audit"
)

// ErrUnknownPolicy is wrapped by DefaultInboundServer for an unknown name.
var ErrUnknownPolicy = errors.New("dataplane: unknown default inbound policy")

// DefaultPolicies lists the default inbound policy names.
func DefaultPolicies() []string {
	return []string{AllUnauthenticated, AllAuthenticated, ClusterUnauthenticated, ClusterAuthenticated, DenyAll, AuditAll}
}

// defaultPolicy builds the policy a default inbound policy name stands
// for, as the policy controller describes a port no Server selects: the
// protocol is detected and every HTTP request takes the default route, so
// the server's authorizations decide. cluster is used by the cluster-*
// policies (nil: vocab.DefaultClusterNetworks).
func defaultPolicy(name string, cluster []netip.Prefix) (*authz.Server, error) {
	if cluster == nil {
		cluster = vocab.DefaultClusterNetworks()
	}
	var clusterNets []authz.Network
	for _, p := range cluster {
		clusterNets = append(clusterNets, authz.Network{Net: p.Masked()})
	}
	meta := authz.DefaultMeta(name)
	anyone := authz.Authentication{Kind: authz.Unauthenticated}
	anyID := authz.Authentication{Kind: authz.TLSAuthenticated, Suffixes: []string{""}}
	s := &authz.Server{Meta: meta, Protocol: authz.ProtocolDetect, HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()}}
	switch name {
	case AllUnauthenticated:
		s.Authorizations = []authz.Authorization{{Meta: meta, Networks: authz.AllNetworks(), Authentication: anyone}}
	case AllAuthenticated:
		s.Authorizations = []authz.Authorization{{Meta: meta, Networks: authz.AllNetworks(), Authentication: anyID}}
	case ClusterUnauthenticated:
		s.Authorizations = []authz.Authorization{{Meta: meta, Networks: clusterNets, Authentication: anyone}}
	case ClusterAuthenticated:
		s.Authorizations = []authz.Authorization{{Meta: meta, Networks: clusterNets, Authentication: anyID}}
	case AuditAll:
		s.Authorizations = []authz.Authorization{{Meta: meta, Audit: true, Networks: authz.AllNetworks(), Authentication: anyone}}
	case DenyAll:
	default:
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownPolicy, name, strings.Join(DefaultPolicies(), ", "))
	}
	return s, nil
}

// DefaultInboundServer returns the policy a default inbound policy name
// stands for, in the proxy API's form (what MemoryPolicies and the static
// file carry). cluster is used by the cluster-* policies (nil:
// vocab.DefaultClusterNetworks).
func DefaultInboundServer(name string, cluster []netip.Prefix) (*inbound.Server, error) {
	s, err := defaultPolicy(name, cluster)
	if err != nil {
		return nil, err
	}
	return authz.ToProto(s), nil
}

// compilePolicy converts a policy received from the policy source with the
// shared evaluator's strict FromProto. A port read as HTTP without any
// route gets the default route (every request, the server's
// authorizations), which is what the policy controller sends for a server
// without HTTPRoutes.
func compilePolicy(ps *inbound.Server) (*authz.Server, error) {
	s, err := authz.FromProto(ps)
	if err != nil {
		return nil, err
	}
	switch {
	case s.Protocol == authz.ProtocolGRPC && len(s.GRPCRoutes) == 0:
		s.GRPCRoutes = []authz.GRPCRoute{authz.DefaultGRPCRoute()}
	case s.Protocol.IsHTTP() && s.Protocol != authz.ProtocolGRPC && len(s.HTTPRoutes) == 0:
		s.HTTPRoutes = []authz.HTTPRoute{authz.DefaultHTTPRoute()}
	}
	return s, nil
}

// denyAllPolicy stands in for a port whose first policy could not be read.
func denyAllPolicy(reason string) *authz.Server {
	return &authz.Server{Meta: authz.DefaultMeta(reason), Protocol: authz.ProtocolDetect, HTTPRoutes: []authz.HTTPRoute{authz.DefaultHTTPRoute()}}
}
