// Package v1alpha2 holds the linkerd.io/v1alpha2 ServiceProfile, as Linkerd
// defines it.
//
// A ServiceProfile is named after the fully qualified DNS name of a service
// (for example "web.my-app.svc.cluster.local") and tells clients' proxies
// about that service: its routes (for per-route metrics, retries and
// timeouts), how to classify responses as failures, a retry budget, and
// weighted destination overrides.
//
// Route and response conditions nest (all, any, not), so the CRD schema
// leaves nested conditions unchecked, as Linkerd's does; the Go types here
// are the full, recursive description and a strict decoder
// (github.com/weftmesh/weft/apis/manifest) checks every level.
//
// Register the types with a scheme through AddToScheme; nothing is registered
// into a global scheme on import.
//
// +kubebuilder:object:generate=true
// +groupName=linkerd.io
package v1alpha2
