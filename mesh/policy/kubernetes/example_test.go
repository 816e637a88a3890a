package kubernetes_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/kubernetes"
)

func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "my-app"}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kubernetes.ListKinds())
	src, err := kubernetes.New(ctx, client, dyn)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	x, err := policy.NewIndexer(ctx, src)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(src.Objects().Namespaces), "namespace;", len(x.Index().Problems()), "problems")
	// Output: 1 namespace; 0 problems
}
