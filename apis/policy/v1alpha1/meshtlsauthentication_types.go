package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MeshTLSAuthentication is satisfied by a client whose mesh TLS identity
// matches any of the listed identities.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=meshtlsauthn
type MeshTLSAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the identities.
	Spec MeshTLSAuthenticationSpec `json:"spec"`
}

// MeshTLSAuthenticationSpec lists identities, either by name or by
// reference; exactly one of the two fields must be set.
//
// +kubebuilder:validation:ExactlyOneOf=identities;identityRefs
type MeshTLSAuthenticationSpec struct {
	// Identities are proxy identity names. A leading "*" label matches any
	// identity in a domain, and "*" alone matches every authenticated
	// client.
	//
	// +optional
	// +kubebuilder:validation:MinItems=1
	Identities []string `json:"identities,omitempty"`

	// IdentityRefs name resources whose identities are meant, such as
	// ServiceAccounts.
	//
	// +optional
	// +kubebuilder:validation:MinItems=1
	IdentityRefs []IdentityRef `json:"identityRefs,omitempty"`
}

// MeshTLSAuthenticationList is a list of MeshTLSAuthentications.
//
// +kubebuilder:object:root=true
type MeshTLSAuthenticationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the MeshTLSAuthentications.
	Items []MeshTLSAuthentication `json:"items"`
}
