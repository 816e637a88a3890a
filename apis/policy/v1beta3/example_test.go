package v1beta3_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weftmesh/weft/apis/policy/v1beta3"
)

func ExampleAddToScheme() {
	s := runtime.NewScheme()
	if err := v1beta3.AddToScheme(s); err != nil {
		fmt.Println(err)
		return
	}
	srv := &v1beta3.Server{
		ObjectMeta: metav1.ObjectMeta{Name: "web-http", Namespace: "my-app"},
		Spec: v1beta3.ServerSpec{
			PodSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Port:          intstr.FromString("http"),
			ProxyProtocol: v1beta3.ProxyProtocolHTTP1,
			AccessPolicy:  v1beta3.AccessPolicyDeny,
		},
	}
	gvks, _, err := s.ObjectKinds(srv)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(gvks[0])
	// Output:
	// policy.linkerd.io/v1beta3, Kind=Server
}
