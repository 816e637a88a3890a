// Command weft-policy is Weft's offline policy tester on its own: `test`,
// `explain` and `authz`, exactly `weft policy test`, `weft policy explain`
// and `weft authz`. It links mesh/policy and apis/manifest and nothing of
// Kubernetes' client, the CA backends or the injector, so a user's module
// can carry it as a tool cheaply:
//
//	go get -tool github.com/weftmesh/weft/cmd/weft-policy@latest
//	go tool weft-policy test --manifests deploy/ --cases policy-cases.yaml
//
// The commands live in internal/cli/policycmd; this file only runs them.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/policycmd"
)

func main() {
	os.Exit(core.Main("weft-policy", policycmd.Commands(), os.Args[1:], core.StdIO()))
}
