package pathnorm_test

import (
	"fmt"

	"github.com/weftmesh/weft/mesh/policy/pathnorm"
)

func ExampleNormalize() {
	for _, raw := range []string{"/public/../admin", "//admin", "/%2e%2e/admin", "/admin%2F"} {
		p, err := pathnorm.Normalize(raw)
		if err != nil {
			fmt.Println(raw, "refused:", err)
			continue
		}
		fmt.Println(raw, "->", p)
	}
	// Output:
	// /public/../admin -> /admin
	// //admin -> /admin
	// /%2e%2e/admin -> /admin
	// /admin%2F refused: pathnorm: encoded slash or backslash at offset 6 in "/admin%2F"
}
