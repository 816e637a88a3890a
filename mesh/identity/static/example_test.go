package static_test

import (
	"context"
	"fmt"

	"github.com/weftmesh/weft/mesh/identity/static"
)

func ExampleParse() {
	set, err := static.Parse([]byte(`
tokens:
- token: "a-long-random-token-for-web"
  namespace: shop
  serviceAccount: web
`))
	if err != nil {
		panic(err)
	}
	sa, err := set.Authenticate(context.Background(), []byte("a-long-random-token-for-web"))
	fmt.Println(sa, err)
	// Output: shop/web <nil>
}
