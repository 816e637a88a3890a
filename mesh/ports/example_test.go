package ports_test

import (
	"fmt"

	"github.com/weftmesh/weft/mesh/ports"
)

// Parse reads Linkerd's port lists: numbers, ranges and, given a pod's
// container ports, their names.
func ExampleParse() {
	set, err := ports.Parse("3306, 4000-4100, metrics", map[string]int32{"metrics": 9090})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(set, set.Contains(4042), set.Contains(8080))
	_, err = ports.Parse("70000", nil)
	fmt.Println(err != nil)
	// Output:
	// 3306,4000-4100,9090 true false
	// true
}

// A pod's opaque ports: its own annotation wins, then its namespace's,
// then the default list cut to the ports its containers declare.
func ExampleOpaqueForPod() {
	declared := []uint16{3306, 8080}
	set, src, _ := ports.OpaqueForPod(nil, nil, nil, declared, ports.DefaultOpaque())
	fmt.Println(set, "from", src)
	set, src, _ = ports.OpaqueForPod(nil, map[string]string{"config.linkerd.io/opaque-ports": "5432"}, nil, declared, ports.DefaultOpaque())
	fmt.Println(set, "from", src)
	// Output:
	// 3306 from default
	// 5432 from namespace annotation
}
