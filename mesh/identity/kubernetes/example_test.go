package kubernetes_test

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/weftmesh/weft/mesh/identity/kubernetes"
)

// ExampleNew wires the TokenReview authenticator; a fake clientset stands
// in for the API server here.
func ExampleNew() {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		tr.Status = authnv1.TokenReviewStatus{
			Authenticated: true,
			Audiences:     tr.Spec.Audiences,
			User:          authnv1.UserInfo{Username: "system:serviceaccount:shop:web"},
		}
		return true, tr, nil
	})
	authn, err := kubernetes.New(context.Background(), client)
	if err != nil {
		panic(err)
	}
	sa, err := authn.Authenticate(context.Background(), []byte("projected-token"))
	fmt.Println(sa, err)
	// Output: shop/web <nil>
}
