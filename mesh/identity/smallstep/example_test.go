package smallstep_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weftmesh/weft/mesh/identity"
	"github.com/weftmesh/weft/mesh/identity/smallstep"
	"github.com/weftmesh/weft/mesh/identity/smallstep/smallsteptest"
)

// ExampleNew signs workload certificates through step-ca; here an
// authority started in-process on loopback.
func ExampleNew() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	authority, err := smallsteptest.Start(ctx, smallsteptest.Options{})
	if err != nil {
		panic(err)
	}
	defer authority.Close()

	issuer, err := smallstep.New(ctx, smallstep.Config{
		URL:         authority.URL,
		Roots:       authority.Roots,
		Provisioner: authority.Provisioner,
		Key:         authority.Key,
	})
	if err != nil {
		panic(err)
	}
	// The issuer plugs into identity.NewService like any other.
	_, err = identity.NewService(ctx, identity.Tokens{}, issuer)
	fmt.Println(err)
	// Output: <nil>
}
