// Package v1beta1 holds the policy.linkerd.io/v1beta1 API: Server and
// ServerAuthorization, as Linkerd defines them.
//
// These are plain Go structs with JSON tags that match Linkerd's CRD field
// names exactly, so a manifest written for Linkerd decodes into them
// unchanged. Server at v1beta1 is deprecated upstream in favour of v1beta3
// (see package github.com/weftmesh/weft/apis/policy/v1beta3), but it is still
// served, so existing manifests keep working. ServerAuthorization only exists
// at v1beta1; AuthorizationPolicy (package v1alpha1) is its successor.
//
// Register the types with a scheme through AddToScheme; nothing is registered
// into a global scheme on import:
//
//	s := runtime.NewScheme()
//	if err := v1beta1.AddToScheme(s); err != nil { ... }
//
// The kubebuilder markers on the types drive both the generated deep-copy
// functions (zz_generated.deepcopy.go) and the CRD manifests in
// github.com/weftmesh/weft/apis/crds; run hack/gen-crds.sh after editing them.
//
// +kubebuilder:object:generate=true
// +groupName=policy.linkerd.io
package v1beta1
