package v1beta3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Server names one port on a set of pods, or of external workloads, so that
// policy can refer to it, and says what happens to traffic that no
// authorization matches.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Namespaced,shortName=srv
// +kubebuilder:printcolumn:name="Port",type=string,JSONPath=".spec.port",description="The port the server listens on"
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=".spec.proxyProtocol",description="The protocol the proxy expects on the port"
// +kubebuilder:printcolumn:name="Access Policy",type=string,JSONPath=".spec.accessPolicy",description="The decision for traffic that no authorization matches"
type Server struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec selects the workloads and the port.
	Spec ServerSpec `json:"spec"`
}

// ServerSpec is the desired state of a Server. Exactly one of PodSelector
// and ExternalWorkloadSelector must be set.
//
// +kubebuilder:validation:ExactlyOneOf=podSelector;externalWorkloadSelector
type ServerSpec struct {
	// AccessPolicy is the decision for traffic to this Server that no
	// authorization matches. The API server defaults it to "deny"; a
	// consumer that reads manifests without an API server must treat an
	// empty value as "deny" too.
	//
	// +optional
	// +kubebuilder:default=deny
	AccessPolicy AccessPolicy `json:"accessPolicy,omitempty"`

	// PodSelector picks pods in the Server's namespace. matchLabels and
	// matchExpressions are ANDed; an empty selector picks every pod.
	//
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// ExternalWorkloadSelector picks ExternalWorkloads in the Server's
	// namespace, with the same rules as PodSelector.
	//
	// +optional
	ExternalWorkloadSelector *metav1.LabelSelector `json:"externalWorkloadSelector,omitempty"`

	// Port is a container port number or a container port name; it must
	// exist in the selected workloads' specs.
	Port intstr.IntOrString `json:"port"`

	// ProxyProtocol tells the proxy which protocol to expect on the port,
	// instead of detecting it. It replaces the
	// config.linkerd.io/opaque-ports annotation for this port. The API
	// server defaults it to "unknown" (detect).
	//
	// +optional
	// +kubebuilder:default=unknown
	ProxyProtocol ProxyProtocol `json:"proxyProtocol,omitempty"`
}

// AccessPolicy is a default authorization decision. The same names are used
// by the config.linkerd.io/default-inbound-policy annotation.
//
// +kubebuilder:validation:Enum=all-unauthenticated;all-authenticated;cluster-authenticated;cluster-unauthenticated;deny;audit
type AccessPolicy string

// The access policies Linkerd accepts.
const (
	// AccessPolicyAllUnauthenticated allows every client.
	AccessPolicyAllUnauthenticated AccessPolicy = "all-unauthenticated"
	// AccessPolicyAllAuthenticated allows every client with a mesh identity.
	AccessPolicyAllAuthenticated AccessPolicy = "all-authenticated"
	// AccessPolicyClusterAuthenticated allows clients with a mesh identity
	// whose address is in the cluster networks.
	AccessPolicyClusterAuthenticated AccessPolicy = "cluster-authenticated"
	// AccessPolicyClusterUnauthenticated allows every client whose address
	// is in the cluster networks.
	AccessPolicyClusterUnauthenticated AccessPolicy = "cluster-unauthenticated"
	// AccessPolicyDeny refuses every client.
	AccessPolicyDeny AccessPolicy = "deny"
	// AccessPolicyAudit allows every client but reports the traffic that
	// "deny" would have refused.
	AccessPolicyAudit AccessPolicy = "audit"
)

// ProxyProtocol is the protocol a proxy expects on an inbound port.
//
// +kubebuilder:validation:Enum=unknown;HTTP/1;HTTP/2;gRPC;opaque;TLS
type ProxyProtocol string

// The protocols Linkerd accepts in Server.spec.proxyProtocol.
const (
	// ProxyProtocolUnknown asks the proxy to detect HTTP and fall back to
	// opaque TCP. It is the default.
	ProxyProtocolUnknown ProxyProtocol = "unknown"
	// ProxyProtocolHTTP1 skips detection and treats traffic as HTTP/1.
	ProxyProtocolHTTP1 ProxyProtocol = "HTTP/1"
	// ProxyProtocolHTTP2 skips detection and treats traffic as HTTP/2.
	ProxyProtocolHTTP2 ProxyProtocol = "HTTP/2"
	// ProxyProtocolGRPC skips detection and treats traffic as gRPC.
	ProxyProtocolGRPC ProxyProtocol = "gRPC"
	// ProxyProtocolOpaque treats traffic as opaque TCP with no detection.
	ProxyProtocolOpaque ProxyProtocol = "opaque"
	// ProxyProtocolTLS treats traffic as TLS that the application
	// terminates itself.
	ProxyProtocolTLS ProxyProtocol = "TLS"
)

// ServerList is a list of Servers.
//
// +kubebuilder:object:root=true
type ServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Servers.
	Items []Server `json:"items"`
}
