package tapapi_test

import (
	"fmt"

	"github.com/weftmesh/weft/mesh/viz"
	"github.com/weftmesh/weft/mesh/viz/tapapi"
)

// A tap of deploy/web in shop is a POST to this path through the API
// server, authorized as `watch` on deployments/tap named web.
func ExampleTargetOf() {
	t, err := tapapi.TargetOf(viz.Resource{Kind: viz.KindWorkload, WorkloadKind: "deployment", Namespace: "shop", Name: "web"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Path())
	fmt.Println(t.Resource+"/"+tapapi.Subresource, t.Name, "in", tapapi.Group)
	// Output:
	// /apis/tap.weftmesh.io/v1alpha1/watch/namespaces/shop/deployments/web/tap
	// deployments/tap web in tap.weftmesh.io
}
