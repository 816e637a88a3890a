package policy

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Validate checks one policy resource (a Server of any version,
// ServerAuthorization, AuthorizationPolicy, MeshTLSAuthentication,
// NetworkAuthentication, HTTPLocalRateLimitPolicy, EgressNetwork, HTTPRoute
// of either group, GRPCRoute, TCPRoute, TLSRoute) with the same
// translation Build applies, and returns the problems that would make
// the index ignore it (SeverityError). An object Validate accepts is one
// Build uses; one it refuses, Build ignores, with the same messages. This
// is what the validating admission webhook (mesh/inject/webhook) answers
// with, so a resource is judged by one rule set whether it arrives through
// the API server, a static file or an informer.
//
// Only the object itself is judged: warnings and whatever depends on other
// objects (a missing Server or authentication, a Server selecting no pod)
// are Build's to report, as the cluster around the object may still
// change. Objects of other kinds, and nil, yield nil. cfg may be nil for
// the defaults.
func Validate(obj runtime.Object, cfg *Config) []Problem {
	if obj == nil {
		return nil
	}
	objs := &Objects{}
	if err := objs.Add(obj, Location{}); err != nil || objs.Len() == 0 {
		return nil
	}
	var out []Problem
	for _, p := range Build(objs, cfg).Errors() {
		p.Location = Location{}
		out = append(out, p)
	}
	return out
}
