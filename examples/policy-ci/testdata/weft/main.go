// Command weft here is a minimal build of the weft CLI holding only the
// policy commands, used by ci_test.go when cmd/weft does not list them.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	cmds := []cli.Command{cli.PolicyCommand(), cli.AuthzCommand(), cli.VersionCommand()}
	os.Exit(cli.Main("weft", cmds, os.Args[1:], cli.StdIO()))
}
