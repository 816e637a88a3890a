package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of Linkerd's policy resources.
const GroupName = "policy.linkerd.io"

// SchemeGroupVersion is the group and version of every kind in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that add this package's kinds to
	// a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds AuthorizationPolicy, MeshTLSAuthentication,
	// NetworkAuthentication, HTTPLocalRateLimitPolicy, EgressNetwork and
	// their lists to s.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&AuthorizationPolicy{}, &AuthorizationPolicyList{},
		&MeshTLSAuthentication{}, &MeshTLSAuthenticationList{},
		&NetworkAuthentication{}, &NetworkAuthenticationList{},
		&HTTPLocalRateLimitPolicy{}, &HTTPLocalRateLimitPolicyList{},
		&EgressNetwork{}, &EgressNetworkList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
