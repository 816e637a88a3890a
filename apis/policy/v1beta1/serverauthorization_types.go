package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServerAuthorization lets a set of clients reach one or more Servers in the
// same namespace. It is the older form of authorization; AuthorizationPolicy
// (policy.linkerd.io/v1alpha1) replaces it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=saz
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=".spec.server.name",description="The Server this authorization grants access to"
type ServerAuthorization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the Servers and the clients.
	Spec ServerAuthorizationSpec `json:"spec"`
}

// ServerAuthorizationSpec is the desired state of a ServerAuthorization.
type ServerAuthorizationSpec struct {
	// Server picks the Servers, in the authorization's namespace, that this
	// authorization applies to.
	Server ServerRef `json:"server"`

	// Client describes the clients that are let in.
	Client Client `json:"client"`
}

// ServerRef picks Servers either by name or by label selector; exactly one
// of the two must be set.
//
// +kubebuilder:validation:ExactlyOneOf=name;selector
type ServerRef struct {
	// Name is the name of one Server.
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// Selector picks Servers by their labels.
	//
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// Client describes the clients a ServerAuthorization lets in.
type Client struct {
	// Networks limits the client addresses this authorization applies to.
	// When unset the policy controller picks a default (usually every
	// address, or the cluster networks).
	//
	// +optional
	Networks []Network `json:"networks,omitempty"`

	// Unauthenticated lets in clients that present no mesh identity.
	//
	// +optional
	Unauthenticated bool `json:"unauthenticated,omitempty"`

	// MeshTLS lets in clients by the identity they present over mesh TLS.
	//
	// +optional
	MeshTLS *MeshTLS `json:"meshTLS,omitempty"`
}

// MeshTLS describes clients authenticated by mesh TLS.
type MeshTLS struct {
	// UnauthenticatedTLS lets in TLS clients that have no identity yet.
	// The identity controller needs it: its clients ask for their first
	// certificate before they have one.
	//
	// +optional
	UnauthenticatedTLS bool `json:"unauthenticatedTLS,omitempty"`

	// Identities are proxy identity names. A leading "*" label matches any
	// identity in a domain, and "*" alone matches every authenticated client.
	//
	// +optional
	// +kubebuilder:validation:items:Pattern=`^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Identities []string `json:"identities,omitempty"`

	// ServiceAccounts are the service accounts whose proxies are let in.
	//
	// +optional
	ServiceAccounts []ServiceAccountRef `json:"serviceAccounts,omitempty"`
}

// ServiceAccountRef names a ServiceAccount.
type ServiceAccountRef struct {
	// Name is the ServiceAccount's name.
	//
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Namespace is the ServiceAccount's namespace; when unset, the
	// authorization's own namespace is used.
	//
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
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

// ServerAuthorizationList is a list of ServerAuthorizations.
//
// +kubebuilder:object:root=true
type ServerAuthorizationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServerAuthorizations.
	Items []ServerAuthorization `json:"items"`
}
