// Package v1alpha1 holds the policy.linkerd.io/v1alpha1 authorization API:
// AuthorizationPolicy, MeshTLSAuthentication and NetworkAuthentication, the
// HTTPLocalRateLimitPolicy and the EgressNetwork, as Linkerd defines them.
//
// An AuthorizationPolicy targets something that receives traffic (a Server,
// an HTTPRoute, a GRPCRoute or a whole Namespace) and lists the
// authentications a client must satisfy, all of them, to be let in. The
// authentications are either MeshTLSAuthentication (the client's mesh
// identity, given as names or as references to ServiceAccounts) or
// NetworkAuthentication (the client's address), or a ServiceAccount
// referenced directly.
//
// An HTTPLocalRateLimitPolicy targets a Server and limits the HTTP request
// rate its proxies accept: in total, per client identity, and for clients
// named by ServiceAccount (overrides).
//
// An EgressNetwork names networks outside the cluster and whether clients'
// proxies forward (Allow) or refuse (Deny) traffic to them that no route
// attached to it describes.
//
// Register the types with a scheme through AddToScheme; nothing is registered
// into a global scheme on import.
//
// +kubebuilder:object:generate=true
// +groupName=policy.linkerd.io
package v1alpha1
