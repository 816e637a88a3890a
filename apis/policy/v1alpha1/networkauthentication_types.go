package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkAuthentication is satisfied by a client whose address is in any of
// the listed networks.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=netauthn;networkauthn
type NetworkAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the networks.
	Spec NetworkAuthenticationSpec `json:"spec"`
}

// NetworkAuthenticationSpec lists client networks.
type NetworkAuthenticationSpec struct {
	// Networks are the client networks.
	Networks []Network `json:"networks"`
}

// Network is a CIDR block, minus some exceptions.
type Network struct {
	// Cidr is the network, such as "10.0.0.0/8" or "fd00::/8". A bare
	// address stands for a single host.
	Cidr string `json:"cidr"`

	// Except are networks or addresses inside Cidr that are left out.
	//
	// +optional
	Except []string `json:"except,omitempty"`
}

// NetworkAuthenticationList is a list of NetworkAuthentications.
//
// +kubebuilder:object:root=true
type NetworkAuthenticationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the NetworkAuthentications.
	Items []NetworkAuthentication `json:"items"`
}
