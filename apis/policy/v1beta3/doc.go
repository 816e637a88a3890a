// Package v1beta3 holds the policy.linkerd.io/v1beta3 API: Server (the
// version the API server stores) and Linkerd's own HTTPRoute.
//
// Server at v1beta3 adds accessPolicy, the default decision for traffic that
// no authorization matches. Older Server versions (packages v1beta1 and
// v1beta2) are still served; they carry a subset of these fields, so the API
// server converts between them without a webhook.
//
// HTTPRoute here is policy.linkerd.io's HTTPRoute, a close relative of the
// Gateway API HTTPRoute (gateway.networking.k8s.io/v1) that Linkerd shipped
// before the Gateway API one was stable. It reuses the Gateway API Go types
// for matches, header filters, redirects, backend references, timeouts and
// status; it differs in its parentRefs defaults (group policy.linkerd.io) and
// in the filters it accepts (RequestHeaderModifier, ResponseHeaderModifier
// and RequestRedirect only).
//
// Register the types with a scheme through AddToScheme; nothing is registered
// into a global scheme on import.
//
// +kubebuilder:object:generate=true
// +groupName=policy.linkerd.io
package v1beta3
