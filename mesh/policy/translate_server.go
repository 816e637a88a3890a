package policy

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/policy/v1beta1"
	"github.com/weftmesh/weft/apis/policy/v1beta3"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

type serverSpec struct {
	obj      *v1beta3.Server
	ref      ObjectRef
	selector labels.Selector
	port     intstr.IntOrString
	protocol authz.Protocol
	access   *DefaultPolicy
	valid    bool
	// selects counts the workloads the server selects, for lints.
	selects int
}

func translateServer(p *problems, s *v1beta3.Server) *serverSpec {
	ref := ObjectRef{Kind: "Server", Namespace: s.Namespace, Name: s.Name}
	spec := &serverSpec{obj: s, ref: ref, port: s.Spec.Port, valid: true}
	if s.Spec.PodSelector == nil {
		if s.Spec.ExternalWorkloadSelector != nil {
			p.warnf(ref, "spec.externalWorkloadSelector", "external workloads are not supported; the Server is ignored")
		} else {
			p.errorf(ref, "spec.podSelector", "missing podSelector")
		}
		spec.valid = false
		return spec
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Spec.PodSelector)
	if err != nil {
		p.errorf(ref, "spec.podSelector", "%v", err)
		spec.valid = false
		return spec
	}
	spec.selector = sel
	switch s.Spec.Port.Type {
	case intstr.Int:
		if s.Spec.Port.IntVal < 1 || s.Spec.Port.IntVal > 65535 {
			p.errorf(ref, "spec.port", "port %d is out of range 1-65535", s.Spec.Port.IntVal)
			spec.valid = false
		}
	case intstr.String:
		if s.Spec.Port.StrVal == "" {
			p.errorf(ref, "spec.port", "empty port name")
			spec.valid = false
		} else if n, err := strconv.Atoi(s.Spec.Port.StrVal); err == nil {
			// "8080" written as a string means the number.
			spec.port = intstr.FromInt32(int32(n))
			if n < 1 || n > 65535 {
				p.errorf(ref, "spec.port", "port %d is out of range 1-65535", n)
				spec.valid = false
			}
		}
	}
	proto, err := authz.ParseProtocol(string(s.Spec.ProxyProtocol))
	if err != nil {
		p.errorf(ref, "spec.proxyProtocol", "%v", err)
		spec.valid = false
	}
	spec.protocol = proto
	if s.Spec.AccessPolicy != "" {
		d, err := ParseDefaultPolicy(string(s.Spec.AccessPolicy))
		if err != nil {
			p.errorf(ref, "spec.accessPolicy", "%v", err)
			spec.valid = false
		} else if d != DenyAll {
			spec.access = &d
		}
	}
	return spec
}

type serverAuthzSpec struct {
	ref      ObjectRef
	name     string
	selector labels.Selector
	authz    authz.Authorization
}

func translateServerAuthz(cfg *Config, p *problems, sa *v1beta1.ServerAuthorization) (*serverAuthzSpec, bool) {
	ref := ObjectRef{Kind: "ServerAuthorization", Namespace: sa.Namespace, Name: sa.Name}
	spec := &serverAuthzSpec{ref: ref}
	ok := true
	switch {
	case sa.Spec.Server.Name != "" && sa.Spec.Server.Selector != nil:
		p.errorf(ref, "spec.server", "set either name or selector, not both")
		ok = false
	case sa.Spec.Server.Name != "":
		spec.name = sa.Spec.Server.Name
	case sa.Spec.Server.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(sa.Spec.Server.Selector)
		if err != nil {
			p.errorf(ref, "spec.server.selector", "%v", err)
			ok = false
		}
		spec.selector = sel
	default:
		p.errorf(ref, "spec.server", "names no server: set name or selector")
		ok = false
	}
	a := authz.Authorization{Meta: metaOf("ServerAuthorization", &sa.ObjectMeta)}
	for i, n := range sa.Spec.Client.Networks {
		net, good := parseNetworks(p, ref, fmt.Sprintf("spec.client.networks[%d]", i), n.Cidr, n.Except)
		if !good {
			ok = false
			continue
		}
		a.Networks = append(a.Networks, net)
	}
	if len(sa.Spec.Client.Networks) == 0 {
		// Linkerd: no networks means the cluster's networks.
		for _, c := range cfg.ClusterNetworks {
			a.Networks = append(a.Networks, authz.Network{Net: c})
		}
	}
	switch {
	case sa.Spec.Client.Unauthenticated && sa.Spec.Client.MeshTLS != nil:
		// Ambiguous, and the broader reading would grant more than the
		// meshTLS part says: refused, as Linkerd's admission does.
		p.errorf(ref, "spec.client.unauthenticated", "must be false when meshTLS is set")
		ok = false
	case sa.Spec.Client.Unauthenticated:
		a.Authentication = authz.Authentication{Kind: authz.Unauthenticated}
	case sa.Spec.Client.MeshTLS != nil:
		m := sa.Spec.Client.MeshTLS
		if m.UnauthenticatedTLS && (len(m.Identities) > 0 || len(m.ServiceAccounts) > 0) {
			p.errorf(ref, "spec.client.meshTLS.unauthenticatedTLS", "must be false when identities or serviceAccounts are set")
			ok = false
			break
		}
		if m.UnauthenticatedTLS {
			a.Authentication = authz.Authentication{Kind: authz.TLSUnauthenticated}
			break
		}
		var patterns []string
		for i, id := range m.Identities {
			if _, _, err := authz.ParseIdentity(id); err != nil {
				p.errorf(ref, fmt.Sprintf("spec.client.meshTLS.identities[%d]", i), "%v", err)
				ok = false
				continue
			}
			patterns = append(patterns, id)
		}
		for i, s := range m.ServiceAccounts {
			if s.Name == "" {
				p.errorf(ref, fmt.Sprintf("spec.client.meshTLS.serviceAccounts[%d].name", i), "empty service account name")
				ok = false
				continue
			}
			ns := s.Namespace
			if ns == "" {
				ns = sa.Namespace
			}
			patterns = append(patterns, cfg.ServiceAccountIdentity(s.Name, ns))
		}
		if !ok {
			break
		}
		authn, err := authz.NewAuthentication(patterns...)
		if err != nil {
			p.errorf(ref, "spec.client.meshTLS", "authorizes no clients: list identities or serviceAccounts, or set unauthenticatedTLS")
			ok = false
		}
		a.Authentication = authn
	default:
		p.errorf(ref, "spec.client", "no client authentication configured: set unauthenticated or meshTLS")
		ok = false
	}
	spec.authz = a
	return spec, ok
}
