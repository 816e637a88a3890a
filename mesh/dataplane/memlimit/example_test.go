package memlimit_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/weftmesh/weft/mesh/dataplane/memlimit"
)

// Apply reads the container's memory limit and sets the runtime's to 90%
// of it, unless GOMEMLIMIT is set. weft-proxy calls it with root "/",
// os.LookupEnv and runtime/debug.SetMemoryLimit; here root is a fake
// cgroup v2 tree of a container limited to 100 MiB.
func ExampleApply() {
	root, _ := os.MkdirTemp("", "memlimit")
	defer os.RemoveAll(root)
	write := func(p, s string) {
		_ = os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		_ = os.WriteFile(filepath.Join(root, p), []byte(s), 0o644)
	}
	write("proc/self/cgroup", "0::/\n")
	write("sys/fs/cgroup/memory.max", "104857600\n")

	noEnv := func(string) (string, bool) { return "", false }
	var set int64
	r, err := memlimit.Apply(root, 0.9, noEnv, func(n int64) int64 { set = n; return 0 })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Container, r.Limit, set == r.Limit)

	withEnv := func(k string) (string, bool) { return "200MiB", k == "GOMEMLIMIT" }
	r, _ = memlimit.Apply(root, 0.9, withEnv, func(int64) int64 { panic("not called") })
	fmt.Println(r.Source, r.Limit)
	// Output:
	// 104857600 94371840 true
	// GOMEMLIMIT 0
}
