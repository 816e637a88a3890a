package v1beta2_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/policy/v1beta2"
)

func ExampleAddToScheme() {
	s := runtime.NewScheme()
	if err := v1beta2.AddToScheme(s); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Recognizes(v1beta2.SchemeGroupVersion.WithKind("Server")))
	// Output:
	// true
}
