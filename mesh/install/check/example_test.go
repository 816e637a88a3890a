package check_test

import (
	"context"
	"fmt"

	apiextfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/weftmesh/weft/mesh/install/check"
)

// Check an empty cluster before installing Weft. The fake clientsets stand
// in for clients built from a kubeconfig; the fake answers every access
// review with "denied", so that check fails.
func ExampleChecker_Check() {
	kube := fake.NewClientset()
	kube.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "31", GitVersion: "v1.31.0"}
	c, err := check.New(kube, apiextfake.NewClientset(), check.WithNamespace("weft"))
	if err != nil {
		panic(err)
	}
	report := c.Check(context.Background(), check.Scope{Pre: true})
	for _, r := range report.Results {
		fmt.Printf("%-7s %s\n", r.Status, r.Name)
	}
	fmt.Println("success:", report.Success)
	// Output:
	// ok      can query the Kubernetes API
	// ok      Kubernetes version is supported
	// ok      control-plane namespace does not exist yet
	// fail    you may create the control plane's resources
	// ok      existing CRDs are compatible
	// success: false
}
