package v1beta1_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/weftmesh/weft/apis/policy/v1beta1"
)

func ExampleAddToScheme() {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Recognizes(v1beta1.SchemeGroupVersion.WithKind("Server")))
	// Output:
	// true
}
