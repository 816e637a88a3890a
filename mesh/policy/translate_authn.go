package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

type meshTLSResult struct {
	authn authz.Authentication
	meta  authz.Meta
	err   bool
}

type networkResult struct {
	nets []authz.Network
	meta authz.Meta
	err  bool
}

func parseNetworks(p *problems, ref ObjectRef, field string, cidr string, except []string) (authz.Network, bool) {
	n, err := authz.ParseNetwork(cidr, except...)
	if err != nil {
		p.errorf(ref, field, "%v", err)
		return n, false
	}
	var hb *authz.HostBitsError
	if _, err := authz.ParsePrefix(cidr); errors.As(err, &hb) {
		p.warnf(ref, field+".cidr", "%q has host bits set; it means %s", cidr, hb.Masked)
	}
	return n, true
}

func translateMeshTLS(cfg *Config, p *problems, m *v1alpha1.MeshTLSAuthentication) meshTLSResult {
	ref := ObjectRef{Kind: "MeshTLSAuthentication", Namespace: m.Namespace, Name: m.Name}
	// Until proven valid, the authentication admits no one.
	res := meshTLSResult{meta: metaOf("MeshTLSAuthentication", &m.ObjectMeta), authn: authz.Authentication{Kind: authz.TLSAuthenticated}}
	var patterns []string
	for i, id := range m.Spec.Identities {
		if _, _, err := authz.ParseIdentity(id); err != nil {
			p.errorf(ref, fmt.Sprintf("spec.identities[%d]", i), "%v", err)
			res.err = true
			continue
		}
		patterns = append(patterns, id)
	}
	for i, r := range m.Spec.IdentityRefs {
		field := fmt.Sprintf("spec.identityRefs[%d]", i)
		ns := m.Namespace
		if r.Namespace != nil && *r.Namespace != "" {
			ns = *r.Namespace
		}
		name := ""
		if r.Name != nil {
			name = string(*r.Name)
		}
		switch {
		case isCoreGroup(string(r.Group)) && strings.EqualFold(string(r.Kind), "ServiceAccount"):
			if name == "" {
				p.errorf(ref, field+".name", "a ServiceAccount reference needs a name")
				res.err = true
				continue
			}
			if name == "*" {
				patterns = append(patterns, "*."+cfg.namespaceIdentitySuffix(ns))
				continue
			}
			patterns = append(patterns, cfg.ServiceAccountIdentity(name, ns))
		case isCoreGroup(string(r.Group)) && strings.EqualFold(string(r.Kind), "Namespace"):
			if name == "" {
				name = m.Namespace
			}
			patterns = append(patterns, "*."+cfg.namespaceIdentitySuffix(name))
		default:
			p.errorf(ref, field+".kind", "unsupported identity reference %s (want ServiceAccount or Namespace)", groupKind(string(r.Group), string(r.Kind)))
			res.err = true
		}
	}
	if res.err {
		return res
	}
	a, err := authz.NewAuthentication(patterns...)
	if err != nil {
		p.errorf(ref, "spec", "no identities configured: an empty list never admits anyone")
		res.err = true
		return res
	}
	res.authn = a
	return res
}

func translateNetworkAuthn(p *problems, n *v1alpha1.NetworkAuthentication) networkResult {
	ref := ObjectRef{Kind: "NetworkAuthentication", Namespace: n.Namespace, Name: n.Name}
	res := networkResult{meta: metaOf("NetworkAuthentication", &n.ObjectMeta)}
	if len(n.Spec.Networks) == 0 {
		p.errorf(ref, "spec.networks", "no networks: an empty list never admits anyone")
		res.err = true
		return res
	}
	for i, nw := range n.Spec.Networks {
		net, ok := parseNetworks(p, ref, fmt.Sprintf("spec.networks[%d]", i), nw.Cidr, nw.Except)
		if !ok {
			res.err = true
			continue
		}
		res.nets = append(res.nets, net)
	}
	return res
}
