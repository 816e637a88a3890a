package static_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/weftmesh/weft/mesh/policy"
	"github.com/weftmesh/weft/mesh/policy/static"
)

func ExampleNew() {
	dir, err := os.MkdirTemp("", "policy")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	_ = os.WriteFile(filepath.Join(dir, "ns.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: my-app}\n"), 0o600)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := static.New(ctx, []string{dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	x, err := policy.NewIndexer(ctx, src)
	if err != nil {
		fmt.Println(err)
		return
	}
	go x.Run(ctx) // rebuilds the index whenever the files change
	fmt.Println(len(src.Objects().Namespaces), "namespace loaded")
	// Output: 1 namespace loaded
}
