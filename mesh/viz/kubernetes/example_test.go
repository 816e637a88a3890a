package kubernetes_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	vizk8s "github.com/weftmesh/weft/mesh/viz/kubernetes"
)

// The source lists a namespace's running meshed pods as viz targets, with
// the identity each proxy holds and its admin port; viz.ScrapeAll then
// reads each proxy's /metrics through the API server. A real clientset
// (kubernetes.NewForConfig) takes the fake's place.
func ExampleNew() {
	ctrl := true
	meshed := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-5d9f-x2k4q", Namespace: "shop",
			Labels:          map[string]string{"linkerd.io/control-plane-ns": "weft", "pod-template-hash": "5d9f"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &ctrl}},
		},
		Spec:   corev1.PodSpec{ServiceAccountName: "web"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
	plain := meshed.DeepCopy()
	plain.Name, plain.Labels = "batch-1", nil // no proxy: not a target

	src := vizk8s.New(fake.NewClientset(meshed, plain), vizk8s.WithNamespace("shop"))
	targets, err := src.Targets(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range targets {
		fmt.Println(t.Pod, t.WorkloadKind, t.Workload, t.Identity, t.Admin)
	}
	// Output: web-5d9f-x2k4q deployment web web.shop.serviceaccount.identity.weft.cluster.local 4191
}
