package kubernetes_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/discovery"
	"github.com/weftmesh/weft/mesh/discovery/kubernetes"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Feed an index from a cluster (here client-go's fake clientset; in
// production kubernetes.NewForConfig and dynamic.NewForConfig).
func ExampleNew() {
	client := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}})
	idx, _ := discovery.NewIndex()
	defer idx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, err := kubernetes.New(ctx, idx, client, nil) // nil: no ServiceProfiles
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	fmt.Println(idx.Stats().Objects["Service"], "service")
	// Output: 1 service
}
