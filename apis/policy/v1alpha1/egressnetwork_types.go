package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EgressNetwork names networks outside the cluster that meshed clients
// reach, and what their proxies do with that traffic when no route
// attached to the EgressNetwork describes it.
//
// A proxy asking the policy controller about an address that is no
// Service's gets an EgressNetwork whose networks contain the address:
// when the client's own namespace has EgressNetworks, one of those;
// otherwise one of the global egress namespace (a setting of the policy
// controller). The most specific network wins, then the oldest object,
// then the name. Without a match the destination gets the implicit
// "egress-fallback" policy, which forwards everything.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=policy
// +kubebuilder:subresource:status
type EgressNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec lists the networks and the traffic policy.
	Spec EgressNetworkSpec `json:"spec"`

	// Status is written by the policy controller, as Linkerd's status
	// controller writes it: the Accepted condition (False with reason
	// EgressReasonNetworkOverlap when a network overlaps the cluster
	// networks).
	//
	// +optional
	Status *EgressNetworkStatus `json:"status,omitempty"`
}

// EgressNetworkSpec is the desired state of an EgressNetwork.
type EgressNetworkSpec struct {
	// TrafficPolicy applies to traffic that no route attached to the
	// EgressNetwork describes: Allow forwards it to its original
	// destination, Deny refuses it.
	TrafficPolicy TrafficPolicy `json:"trafficPolicy"`

	// Networks are the destinations the EgressNetwork stands for. When
	// the field is absent, every address outside the cluster networks
	// (0.0.0.0/0 and ::/0 minus them). An empty list is refused by the
	// admission webhook, as Linkerd's refuses it.
	//
	// +optional
	Networks []Network `json:"networks"` // no omitempty: an empty list must stay distinct from an absent one through conversions

}

// TrafficPolicy is what happens to egress traffic no route describes.
//
// +kubebuilder:validation:Enum=Allow;Deny
type TrafficPolicy string

// The traffic policies.
const (
	// TrafficPolicyAllow forwards the traffic to its original destination.
	TrafficPolicyAllow TrafficPolicy = "Allow"
	// TrafficPolicyDeny refuses it: HTTP requests are answered 403 (gRPC
	// calls PERMISSION_DENIED), other connections are closed.
	TrafficPolicyDeny TrafficPolicy = "Deny"
)

// EgressNetworkStatus is the status Linkerd's controller writes.
type EgressNetworkStatus struct {
	// Conditions hold the Accepted condition.
	//
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EgressNetworkList is a list of EgressNetworks.
//
// +kubebuilder:object:root=true
type EgressNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the EgressNetworks.
	Items []EgressNetwork `json:"items"`
}
