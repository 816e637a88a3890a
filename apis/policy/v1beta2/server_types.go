package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Server names one port on a set of pods, or of external workloads, so that
// policy can refer to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=srv
// +kubebuilder:printcolumn:name="Port",type=string,JSONPath=".spec.port",description="The port the server listens on"
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=".spec.proxyProtocol",description="The protocol the proxy expects on the port"
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
	// config.linkerd.io/opaque-ports annotation for this port.
	//
	// +optional
	// +kubebuilder:default=unknown
	ProxyProtocol ProxyProtocol `json:"proxyProtocol,omitempty"`
}

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
