package policy

import (
	"fmt"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
	"github.com/weftmesh/weft/mesh/policy/authz"
)

type targetKind uint8

const (
	targetServer targetKind = iota
	targetNamespace
	targetHTTPRoute
	targetGRPCRoute
)

type apSpec struct {
	ref    ObjectRef
	target targetKind
	// targetGroup and targetName name a Server or route.
	targetGroup string
	targetName  string
	authz       authz.Authorization
	usable      bool // false when a reference is missing or invalid
}

func translateAuthorizationPolicy(cfg *Config, p *problems, ap *v1alpha1.AuthorizationPolicy,
	meshTLS map[nsName]meshTLSResult, nets map[nsName]networkResult) (*apSpec, bool) {

	ref := ObjectRef{Kind: "AuthorizationPolicy", Namespace: ap.Namespace, Name: ap.Name}
	spec := &apSpec{ref: ref, usable: true}
	tr := ap.Spec.TargetRef
	g, k := string(tr.Group), string(tr.Kind)
	spec.targetGroup, spec.targetName = g, string(tr.Name)
	switch {
	case strings.EqualFold(g, policyGroup) && strings.EqualFold(k, "Server"):
		spec.target = targetServer
	case isCoreGroup(g) && strings.EqualFold(k, "Namespace"):
		spec.target = targetNamespace
		if string(tr.Name) != ap.Namespace {
			p.warnf(ref, "spec.targetRef.name", "targets Namespace %q but policies only apply in their own namespace %q", tr.Name, ap.Namespace)
		}
	case (strings.EqualFold(g, policyGroup) || strings.EqualFold(g, gatewayv1.GroupName)) && strings.EqualFold(k, "HTTPRoute"):
		spec.target = targetHTTPRoute
		spec.targetGroup = strings.ToLower(g)
	case strings.EqualFold(g, gatewayv1.GroupName) && strings.EqualFold(k, "GRPCRoute"):
		spec.target = targetGRPCRoute
		spec.targetGroup = strings.ToLower(g)
	default:
		p.errorf(ref, "spec.targetRef", "unsupported target %s (want Server, HTTPRoute, GRPCRoute or Namespace)", groupKind(g, k))
		return spec, false
	}
	if len(ap.Spec.RequiredAuthenticationRefs) == 0 {
		p.errorf(ref, "spec.requiredAuthenticationRefs", "at least one authentication reference is required; an empty list never means everyone")
		return spec, false
	}
	a := authz.Authorization{Meta: metaOf("AuthorizationPolicy", &ap.ObjectMeta)}
	var identities *authz.Authentication
	var networks []authz.Network
	haveNets := false
	for i, r := range ap.Spec.RequiredAuthenticationRefs {
		field := fmt.Sprintf("spec.requiredAuthenticationRefs[%d]", i)
		ns := ap.Namespace
		if r.Namespace != nil && *r.Namespace != "" {
			ns = *r.Namespace
		}
		key := nsName{ns, string(r.Name)}
		rg, rk := string(r.Group), string(r.Kind)
		switch {
		case strings.EqualFold(rg, policyGroup) && strings.EqualFold(rk, "MeshTLSAuthentication"):
			if identities != nil {
				p.errorf(ref, field, "a policy may require only one MeshTLSAuthentication or ServiceAccount")
				return spec, false
			}
			m, found := meshTLS[key]
			if !found {
				p.warnf(ref, field, "MeshTLSAuthentication %s/%s not found; the policy admits no one until it exists", ns, r.Name)
				spec.usable = false
				identities = &authz.Authentication{Kind: authz.TLSAuthenticated}
				continue
			}
			if m.err {
				p.warnf(ref, field, "MeshTLSAuthentication %s/%s is invalid; the policy admits no one", ns, r.Name)
				spec.usable = false
			}
			authn := m.authn
			identities = &authn
			a.Sources = append(a.Sources, m.meta)
		case strings.EqualFold(rg, policyGroup) && strings.EqualFold(rk, "NetworkAuthentication"):
			if haveNets {
				p.errorf(ref, field, "a policy may require only one NetworkAuthentication")
				return spec, false
			}
			haveNets = true
			n, found := nets[key]
			if !found {
				p.warnf(ref, field, "NetworkAuthentication %s/%s not found; the policy admits no one until it exists", ns, r.Name)
				spec.usable = false
				continue
			}
			if n.err {
				p.warnf(ref, field, "NetworkAuthentication %s/%s is invalid; the policy admits no one", ns, r.Name)
				spec.usable = false
			}
			networks = n.nets
			a.Sources = append(a.Sources, n.meta)
		case isCoreGroup(rg) && strings.EqualFold(rk, "ServiceAccount"):
			if identities != nil {
				p.errorf(ref, field, "a policy may require only one MeshTLSAuthentication or ServiceAccount")
				return spec, false
			}
			if r.Name == "" {
				p.errorf(ref, field+".name", "empty service account name")
				return spec, false
			}
			authn := authz.Authentication{Kind: authz.TLSAuthenticated, Identities: []string{cfg.ServiceAccountIdentity(string(r.Name), ns)}}
			identities = &authn
			a.Sources = append(a.Sources, authz.Meta{Kind: "ServiceAccount", Namespace: ns, Name: string(r.Name)})
		default:
			p.errorf(ref, field+".kind", "unsupported authentication %s (want MeshTLSAuthentication, NetworkAuthentication or ServiceAccount)", groupKind(rg, rk))
			return spec, false
		}
	}
	if identities != nil {
		a.Authentication = *identities
	} else {
		a.Authentication = authz.Authentication{Kind: authz.Unauthenticated}
	}
	if haveNets {
		a.Networks = networks
	} else {
		a.Networks = authz.AllNetworks()
	}
	spec.authz = a
	return spec, true
}
