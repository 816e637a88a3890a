package kubeenv_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/weftmesh/weft/internal/testutil/kubeenv"
)

// Start a control plane, talk to it as the admin, stop it. In a test suite
// this runs once, in TestMain.
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := kubeenv.Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Stop()

	client, err := kubernetes.NewForConfig(env.Config())
	if err != nil {
		fmt.Println(err)
		return
	}
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ns := range nss.Items {
		fmt.Println(ns.Name)
	}
}
