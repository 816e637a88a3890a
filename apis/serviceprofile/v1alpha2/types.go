package v1alpha2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceProfile describes one service to its clients' proxies. Its name is
// the service's fully qualified DNS name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=sp
type ServiceProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the profile.
	//
	// +optional
	Spec ServiceProfileSpec `json:"spec"`
}

// ServiceProfileSpec is the content of a ServiceProfile.
type ServiceProfileSpec struct {
	// Routes are the service's routes, tried in order; the first whose
	// condition matches a request names it.
	//
	// +optional
	Routes []RouteSpec `json:"routes,omitempty"`

	// RetryBudget bounds the retries clients may add for this service.
	//
	// +optional
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`

	// DstOverrides sends traffic for this service to other authorities,
	// split by weight, instead of to the service itself.
	//
	// +optional
	DstOverrides []WeightedDst `json:"dstOverrides,omitempty"`

	// OpaquePorts are ports of the service whose traffic proxies treat as
	// opaque TCP. Each entry is a port number or a range such as
	// "4000-4100".
	//
	// +optional
	OpaquePorts []string `json:"opaquePorts,omitempty"`
}

// RouteSpec is one route of a service.
type RouteSpec struct {
	// Name names the route in metrics.
	Name string `json:"name"`

	// Condition selects the requests that belong to the route.
	Condition *RequestMatch `json:"condition"`

	// ResponseClasses classify the route's responses; the first class
	// whose condition matches decides whether a response is a failure.
	//
	// +optional
	ResponseClasses []ResponseClass `json:"responseClasses,omitempty"`

	// IsRetryable lets proxies retry failed requests on this route, within
	// the retry budget.
	//
	// +optional
	IsRetryable bool `json:"isRetryable,omitempty"`

	// Timeout bounds each request on this route, as a Go duration such as
	// "300ms". Unset means the proxy's default (10s in Linkerd).
	//
	// +optional
	Timeout string `json:"timeout,omitempty"`
}

// RequestMatch is a condition on a request. Every field that is set must
// hold. All, Any and Not nest other conditions.
type RequestMatch struct {
	// All holds when every condition in it holds.
	//
	// +optional
	// +kubebuilder:validation:items:Type=object
	// +kubebuilder:validation:items:XPreserveUnknownFields
	All []RequestMatch `json:"all,omitempty"`

	// Not holds when its condition does not.
	//
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Not *RequestMatch `json:"not,omitempty"`

	// Any holds when at least one condition in it holds.
	//
	// +optional
	// +kubebuilder:validation:items:Type=object
	// +kubebuilder:validation:items:XPreserveUnknownFields
	Any []RequestMatch `json:"any,omitempty"`

	// PathRegex is a regular expression that the whole request path must
	// match; it is anchored at both ends.
	//
	// +optional
	PathRegex string `json:"pathRegex,omitempty"`

	// Method is the request's HTTP method, such as GET.
	//
	// +optional
	Method string `json:"method,omitempty"`
}

// ResponseClass classifies responses.
type ResponseClass struct {
	// Condition selects the responses in this class.
	Condition *ResponseMatch `json:"condition"`

	// IsFailure marks the responses in this class as failures.
	//
	// +optional
	IsFailure bool `json:"isFailure,omitempty"`
}

// ResponseMatch is a condition on a response. Every field that is set must
// hold. All, Any and Not nest other conditions.
type ResponseMatch struct {
	// All holds when every condition in it holds.
	//
	// +optional
	// +kubebuilder:validation:items:Type=object
	// +kubebuilder:validation:items:XPreserveUnknownFields
	All []ResponseMatch `json:"all,omitempty"`

	// Not holds when its condition does not.
	//
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Not *ResponseMatch `json:"not,omitempty"`

	// Any holds when at least one condition in it holds.
	//
	// +optional
	// +kubebuilder:validation:items:Type=object
	// +kubebuilder:validation:items:XPreserveUnknownFields
	Any []ResponseMatch `json:"any,omitempty"`

	// Status holds when the response status code is in the range.
	//
	// +optional
	Status *Range `json:"status,omitempty"`
}

// Range is an inclusive range of integers, such as HTTP status codes. An
// unset bound is open.
type Range struct {
	// Min is the smallest value in the range.
	//
	// +optional
	Min uint32 `json:"min,omitempty"`

	// Max is the largest value in the range.
	//
	// +optional
	Max uint32 `json:"max,omitempty"`
}

// RetryBudget bounds retries as a share of the original requests, with a
// floor so that low-traffic services can still retry.
type RetryBudget struct {
	// RetryRatio is the largest ratio of retries to original requests,
	// such as 0.2 for 20% more load.
	RetryRatio float32 `json:"retryRatio"`

	// MinRetriesPerSecond is the number of retries per second allowed
	// whatever the ratio.
	MinRetriesPerSecond uint32 `json:"minRetriesPerSecond"`

	// TTL is the window over which requests and retries are counted, as a
	// Go duration such as "10s".
	TTL string `json:"ttl"`
}

// WeightedDst is an authority that receives a share of the traffic.
type WeightedDst struct {
	// Authority is where the traffic goes, such as
	// "web-v2.my-app.svc.cluster.local:80".
	Authority string `json:"authority"`

	// Weight is this destination's share relative to the others' weights.
	Weight resource.Quantity `json:"weight"`
}

// ServiceProfileList is a list of ServiceProfiles.
//
// +kubebuilder:object:root=true
type ServiceProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ServiceProfiles.
	Items []ServiceProfile `json:"items"`
}
