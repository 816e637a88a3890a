package v1alpha1_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/policy/v1alpha1"
)

func ExampleAddToScheme() {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		fmt.Println(err)
		return
	}
	for _, kind := range []string{"AuthorizationPolicy", "MeshTLSAuthentication", "NetworkAuthentication"} {
		fmt.Println(kind, s.Recognizes(v1alpha1.SchemeGroupVersion.WithKind(kind)))
	}
	// Output:
	// AuthorizationPolicy true
	// MeshTLSAuthentication true
	// NetworkAuthentication true
}
