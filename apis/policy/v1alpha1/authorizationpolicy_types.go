package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AuthorizationPolicy lets clients reach a target when they satisfy every
// one of the listed authentications.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=authzpolicy
type AuthorizationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the target and the authentications.
	Spec AuthorizationPolicySpec `json:"spec"`
}

// AuthorizationPolicySpec is the desired state of an AuthorizationPolicy.
type AuthorizationPolicySpec struct {
	// TargetRef is what the policy applies to: a Server, an HTTPRoute, a
	// GRPCRoute or a Namespace, in the policy's namespace.
	TargetRef TargetRef `json:"targetRef"`

	// RequiredAuthenticationRefs must all be satisfied for the policy to
	// let a client in. A policy that refers to an authentication that does
	// not exist lets no one in.
	RequiredAuthenticationRefs []NamespacedTargetRef `json:"requiredAuthenticationRefs"`
}

// AuthorizationPolicyList is a list of AuthorizationPolicies.
//
// +kubebuilder:object:root=true
type AuthorizationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the AuthorizationPolicies.
	Items []AuthorizationPolicy `json:"items"`
}
