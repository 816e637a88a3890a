package v1alpha1

import (
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TargetRef names a resource in the referring object's namespace.
type TargetRef struct {
	// Group is the referent's API group; empty means the core group.
	//
	// +optional
	Group gatewayv1.Group `json:"group,omitempty"`

	// Kind is the referent's kind, such as Server, HTTPRoute or Namespace.
	Kind gatewayv1.Kind `json:"kind"`

	// Name is the referent's name.
	Name gatewayv1.ObjectName `json:"name"`
}

// NamespacedTargetRef names a resource, possibly in another namespace.
type NamespacedTargetRef struct {
	// Group is the referent's API group; empty means the core group.
	//
	// +optional
	Group gatewayv1.Group `json:"group,omitempty"`

	// Kind is the referent's kind, such as MeshTLSAuthentication,
	// NetworkAuthentication or ServiceAccount.
	Kind gatewayv1.Kind `json:"kind"`

	// Name is the referent's name.
	Name gatewayv1.ObjectName `json:"name"`

	// Namespace is the referent's namespace; unset means the referring
	// object's own.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace *string `json:"namespace,omitempty"`
}

// IdentityRef names a resource that stands for mesh identities, such as a
// ServiceAccount or a Namespace. Unlike NamespacedTargetRef its name is
// optional: without one it means every resource of that kind in the
// namespace.
type IdentityRef struct {
	// Group is the referent's API group; empty means the core group.
	//
	// +optional
	Group gatewayv1.Group `json:"group,omitempty"`

	// Kind is the referent's kind, such as ServiceAccount or Namespace.
	Kind gatewayv1.Kind `json:"kind"`

	// Name is the referent's name; unset means every resource of Kind in
	// Namespace.
	//
	// +optional
	Name *gatewayv1.ObjectName `json:"name,omitempty"`

	// Namespace is the referent's namespace; unset means the referring
	// object's own.
	//
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace *string `json:"namespace,omitempty"`
}
