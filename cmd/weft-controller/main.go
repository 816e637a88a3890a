// Command weft-controller runs one control-plane component, chosen by its
// first argument. The components live in internal/cli; this file only lists
// them.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	os.Exit(cli.Main("weft-controller", cli.ControllerCommands(), os.Args[1:], cli.StdIO()))
}
