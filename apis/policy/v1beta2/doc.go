// Package v1beta2 holds the policy.linkerd.io/v1beta2 Server, as Linkerd
// defines it.
//
// v1beta2 adds externalWorkloadSelector to v1beta1's Server: a Server then
// selects either pods or ExternalWorkloads (workloads outside the cluster),
// never both. The newer v1beta3 (package
// github.com/weftmesh/weft/apis/policy/v1beta3) adds accessPolicy and is the
// version the API server stores; v1beta2 is still served so existing
// manifests keep working.
//
// Register the types with a scheme through AddToScheme; nothing is registered
// into a global scheme on import.
//
// +kubebuilder:object:generate=true
// +groupName=policy.linkerd.io
package v1beta2
