package v1beta3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// HTTPRoute is Linkerd's policy.linkerd.io HTTPRoute: it attaches to a parent
// (a Server for inbound policy, a Service for outbound routing) and describes
// how matching HTTP requests are handled.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Hostnames",type=string,JSONPath=".spec.hostnames"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type HTTPRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the route.
	Spec HTTPRouteSpec `json:"spec"`

	// Status is the state of the route as the controllers see it.
	//
	// +optional
	Status HTTPRouteStatus `json:"status,omitempty"`
}

// HTTPRouteSpec is the desired state of an HTTPRoute.
type HTTPRouteSpec struct {
	// ParentRefs are the resources the route attaches to, usually a Server
	// (inbound) or a Service (outbound).
	//
	// +optional
	// +kubebuilder:validation:MaxItems=32
	ParentRefs []ParentReference `json:"parentRefs,omitempty"`

	// Hostnames are matched against the request's Host header (or
	// :authority). A leading "*." label matches any subdomain. An empty
	// list matches every host.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Hostnames []gatewayv1.Hostname `json:"hostnames,omitempty"`

	// Rules are the route's matchers, filters and backends. The first rule
	// that matches a request (by Gateway API precedence) handles it.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:default={{matches: {{path: {type: "PathPrefix", value: "/"}}}}}
	Rules []HTTPRouteRule `json:"rules,omitempty"`
}

// ParentReference names a resource an HTTPRoute attaches to. It has the
// fields of the Gateway API ParentReference, but an omitted group means
// policy.linkerd.io, as in Linkerd's CRD.
type ParentReference struct {
	// Group is the referent's API group. The API server defaults it to
	// policy.linkerd.io; "core" or "" means the core group (for Services).
	//
	// +optional
	// +kubebuilder:default=policy.linkerd.io
	Group *gatewayv1.Group `json:"group,omitempty"`

	// Kind is the referent's kind, such as Server or Service. The API
	// server defaults it to Gateway.
	//
	// +optional
	// +kubebuilder:default=Gateway
	Kind *gatewayv1.Kind `json:"kind,omitempty"`

	// Namespace is the referent's namespace; unset means the route's own.
	//
	// +optional
	Namespace *gatewayv1.Namespace `json:"namespace,omitempty"`

	// Name is the referent's name.
	Name gatewayv1.ObjectName `json:"name"`

	// SectionName names a part of the referent, such as a Gateway listener.
	//
	// +optional
	SectionName *gatewayv1.SectionName `json:"sectionName,omitempty"`

	// Port is the referent's port that the route applies to, for parents
	// that have several (such as a Service).
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
}

// HTTPRouteRule matches requests and says what to do with them.
type HTTPRouteRule struct {
	// Matches are alternatives: the rule applies when any one of them
	// matches. Inside one match, every condition must hold. No matches
	// means a prefix match on "/", which matches every request.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:default={{path:{ type: "PathPrefix", value: "/"}}}
	Matches []gatewayv1.HTTPRouteMatch `json:"matches,omitempty"`

	// Filters change matching requests or their responses.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Filters []HTTPRouteFilter `json:"filters,omitempty"`

	// BackendRefs are where matching requests are sent, split by weight.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	BackendRefs []HTTPBackendRef `json:"backendRefs,omitempty"`

	// Timeouts bound the time a request and each try of it may take.
	//
	// +optional
	Timeouts *gatewayv1.HTTPRouteTimeouts `json:"timeouts,omitempty"`
}

// HTTPRouteFilter is one processing step for a matching request. Type says
// which of the other fields is set; exactly that one must be.
//
// +kubebuilder:validation:XValidation:message="filter.requestHeaderModifier must be set if and only if filter.type is RequestHeaderModifier",rule="has(self.requestHeaderModifier) == (self.type == 'RequestHeaderModifier')"
// +kubebuilder:validation:XValidation:message="filter.responseHeaderModifier must be set if and only if filter.type is ResponseHeaderModifier",rule="has(self.responseHeaderModifier) == (self.type == 'ResponseHeaderModifier')"
// +kubebuilder:validation:XValidation:message="filter.requestRedirect must be set if and only if filter.type is RequestRedirect",rule="has(self.requestRedirect) == (self.type == 'RequestRedirect')"
type HTTPRouteFilter struct {
	// Type is the kind of filter.
	Type HTTPRouteFilterType `json:"type"`

	// RequestHeaderModifier sets, adds or removes request headers.
	//
	// +optional
	RequestHeaderModifier *gatewayv1.HTTPHeaderFilter `json:"requestHeaderModifier,omitempty"`

	// ResponseHeaderModifier sets, adds or removes response headers.
	//
	// +optional
	ResponseHeaderModifier *gatewayv1.HTTPHeaderFilter `json:"responseHeaderModifier,omitempty"`

	// RequestRedirect answers the request with an HTTP redirect.
	//
	// +optional
	RequestRedirect *gatewayv1.HTTPRequestRedirectFilter `json:"requestRedirect,omitempty"`
}

// HTTPRouteFilterType names a kind of HTTPRoute filter.
//
// +kubebuilder:validation:Enum=RequestHeaderModifier;ResponseHeaderModifier;RequestRedirect
type HTTPRouteFilterType string

// The filter types Linkerd's HTTPRoute accepts.
const (
	// HTTPRouteFilterRequestHeaderModifier changes request headers.
	HTTPRouteFilterRequestHeaderModifier HTTPRouteFilterType = "RequestHeaderModifier"
	// HTTPRouteFilterResponseHeaderModifier changes response headers.
	HTTPRouteFilterResponseHeaderModifier HTTPRouteFilterType = "ResponseHeaderModifier"
	// HTTPRouteFilterRequestRedirect answers with a redirect.
	HTTPRouteFilterRequestRedirect HTTPRouteFilterType = "RequestRedirect"
)

// HTTPBackendRef is a weighted backend for matching requests, with filters
// that apply only to requests sent to it.
type HTTPBackendRef struct {
	gatewayv1.BackendRef `json:",inline"`

	// Filters apply only to requests sent to this backend.
	//
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Filters []HTTPRouteFilter `json:"filters,omitempty"`
}

// HTTPRouteStatus is the observed state of an HTTPRoute: one entry per
// parent the route was considered for.
type HTTPRouteStatus struct {
	gatewayv1.RouteStatus `json:",inline"`
}

// HTTPRouteList is a list of HTTPRoutes.
//
// +kubebuilder:object:root=true
type HTTPRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the HTTPRoutes.
	Items []HTTPRoute `json:"items"`
}
