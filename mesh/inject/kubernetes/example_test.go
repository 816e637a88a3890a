package kubernetes_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/mesh/inject/kubernetes"
)

func ExampleNewNamespaces() {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "shop", Annotations: map[string]string{"linkerd.io/inject": "enabled"},
	}})
	nss, err := kubernetes.NewNamespaces(ctx, client)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nss.Close()
	ns, err := nss.Namespace(ctx, "shop")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ns.Annotations["linkerd.io/inject"])
	// Output: enabled
}
