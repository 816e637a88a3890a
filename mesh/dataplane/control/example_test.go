package control_test

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
)

// Connect wires a proxy to the control plane named by its WEFT_PROXY_*
// settings, as weft-proxy does: the proxy's own settings come from
// dataplane.LoadEnv, the control plane and workload from control.LoadEnv.
func ExampleConnect() {
	ctx := context.Background()
	cfg, err := dataplane.LoadEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	cc, err := control.LoadEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := control.Connect(ctx, cc)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	p, err := dataplane.New(ctx, cfg, src.Identity, src.Resolver, src.Policies,
		dataplane.WithOutboundPolicies(src.OutboundPolicies), dataplane.WithProfiles(src.Profiles))
	if err != nil {
		fmt.Println(err)
		return
	}
	ls, err := dataplane.Listen(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Run(ctx, ls)
}

func ExampleWorkload() {
	fmt.Println(control.Workload("shop", "web-1"))
	// Output: {"ns":"shop","pod":"web-1"}
}

// TrafficSpec is what OutboundPolicies.Watch asks for: an address target
// for an IP:port, an authority for anything else.
func ExampleTrafficSpec() {
	w := control.Workload("shop", "web-1")
	byAddr, _ := control.TrafficSpec(w, "10.1.2.3:8080")
	byName, _ := control.TrafficSpec(w, "api.shop.svc.cluster.local:8080")
	fmt.Printf("%#x %d\n", byAddr.GetAddr().GetIp().GetIpv4(), byAddr.GetAddr().GetPort())
	fmt.Println(byName.GetAuthority())
	// Output:
	// 0xa010203 8080
	// api.shop.svc.cluster.local:8080
}
