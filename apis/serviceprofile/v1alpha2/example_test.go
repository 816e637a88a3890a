package v1alpha2_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/serviceprofile/v1alpha2"
)

func ExampleAddToScheme() {
	s := runtime.NewScheme()
	if err := v1alpha2.AddToScheme(s); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Recognizes(v1alpha2.SchemeGroupVersion.WithKind("ServiceProfile")))
	// Output:
	// true
}
