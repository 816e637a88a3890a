// Command weft-controller runs one control-plane component, chosen by its
// first argument. The components live in internal/cli; this file only lists
// them.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	cmds := []cli.Command{
		cli.DestinationControllerCommand(),
		cli.IdentityControllerCommand(),
		cli.InjectorControllerCommand(),
		cli.PolicyControllerCommand(),
		cli.VersionCommand(),
	}
	os.Exit(cli.Main("weft-controller", cmds, os.Args[1:], cli.StdIO()))
}
