package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HTTPLocalRateLimitPolicy limits the rate of HTTP requests a Server's
// proxies accept: in total, per client identity, and for particular
// clients (overrides). Each proxy enforces the limits on its own
// ("local"); they are not shared among the replicas of a workload.
//
// The numbers are checked by the policy translation (the admission webhook
// and every source run it), not by this schema, so that one rule set
// judges them wherever the object arrives: each requestsPerSecond must lie
// in 1..4294967295, and identity and override limits must not exceed the
// total one when it is set.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target_kind",type=string,JSONPath=".spec.targetRef.kind",description="The resource kind to which the rate-limit applies"
// +kubebuilder:printcolumn:name="Target_name",type=string,JSONPath=".spec.targetRef.name",description="The resource name to which the rate-limit applies"
// +kubebuilder:printcolumn:name="Total_RPS",type=integer,format=int32,JSONPath=".spec.total.requestsPerSecond",description="The overall rate-limit"
// +kubebuilder:printcolumn:name="Identity_RPS",type=integer,format=int32,JSONPath=".spec.identity.requestsPerSecond",description="The rate-limit per identity"
type HTTPLocalRateLimitPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the Server and the limits.
	Spec HTTPLocalRateLimitPolicySpec `json:"spec"`

	// Status is what Linkerd's status controller writes. Weft writes no
	// status; it is accepted so that manifests exported from a cluster
	// decode.
	//
	// +optional
	Status *HTTPLocalRateLimitPolicyStatus `json:"status,omitempty"`
}

// HTTPLocalRateLimitPolicySpec is the desired state of an
// HTTPLocalRateLimitPolicy.
type HTTPLocalRateLimitPolicySpec struct {
	// TargetRef is the Server, in the policy's namespace, whose requests
	// are limited. Only one policy applies to a Server: the oldest.
	TargetRef TargetRef `json:"targetRef"`

	// Total is the limit for all requests to the Server together; none
	// when unset.
	//
	// +optional
	Total *Limit `json:"total,omitempty"`

	// Identity is the limit for each client identity on its own; clients
	// without a mesh identity share one such limit. None when unset.
	//
	// +optional
	Identity *Limit `json:"identity,omitempty"`

	// Overrides replace the identity limit for particular clients.
	//
	// +optional
	Overrides []Override `json:"overrides,omitempty"`
}

// Limit is a rate of requests.
type Limit struct {
	// RequestsPerSecond is the sustained rate; the proxy also lets a burst
	// of this many requests through at once.
	RequestsPerSecond int64 `json:"requestsPerSecond"`
}

// Override gives the clients named by ClientRefs a limit of their own,
// shared among them, instead of the identity limit.
type Override struct {
	// RequestsPerSecond is the limit of these clients together.
	RequestsPerSecond int64 `json:"requestsPerSecond"`

	// ClientRefs name the clients: ServiceAccounts, whose namespace
	// defaults to the policy's.
	ClientRefs []NamespacedTargetRef `json:"clientRefs"`
}

// HTTPLocalRateLimitPolicyStatus is the status Linkerd's controller
// writes: whether the policy was accepted by its target.
type HTTPLocalRateLimitPolicyStatus struct {
	// Conditions hold the Accepted condition.
	//
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TargetRef is the Server the status is about.
	TargetRef TargetRef `json:"targetRef"`
}

// HTTPLocalRateLimitPolicyList is a list of HTTPLocalRateLimitPolicies.
//
// +kubebuilder:object:root=true
type HTTPLocalRateLimitPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the HTTPLocalRateLimitPolicies.
	Items []HTTPLocalRateLimitPolicy `json:"items"`
}
