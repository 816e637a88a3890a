package control_test

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/dataplane"
	"github.com/weftmesh/weft/mesh/dataplane/control"
)

// Connect wires a proxy to the control plane named by its WEFT_PROXY_*
// settings, as weft-proxy does.
func ExampleConnect() {
	ctx := context.Background()
	cfg, err := dataplane.LoadEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := control.Connect(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	p, err := dataplane.New(ctx, cfg, src.Identity, src.Resolver, src.Policies)
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
