package local_test

import (
	"fmt"
	"net/netip"

	"github.com/weftmesh/weft/mesh/local"
)

func ExampleNewPlan() {
	f, err := local.Parse("mesh.yaml", []byte(`
namespace: shop
workloads:
- name: api
  ports: [{name: http, port: 8080}]
- name: web
  calls: [{service: api, localPort: 9000}]
policies:
- {workload: api, port: http, allow: [web]}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	plan, err := local.NewPlan(f, netip.MustParseAddr("127.0.1.0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range plan.Pods {
		fmt.Println(p.Name, p.IP, p.Identity)
		for _, m := range p.Mappings {
			fmt.Println("  ", m.Listen, "->", m.Authority)
		}
	}
	// Output:
	// api-0 127.0.1.1 api.shop.serviceaccount.identity.weft.cluster.local
	// web-0 127.0.1.2 web.shop.serviceaccount.identity.weft.cluster.local
	//    127.0.1.2:9000 -> api.shop.svc.cluster.local:8080
}
