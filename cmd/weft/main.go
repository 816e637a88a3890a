// Command weft is Weft's command-line tool. Its command tree is
// cli.WeftRoot (internal/cli); this file only runs it.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	os.Exit(cli.WeftMain(os.Args[1:], cli.StdIO()))
}
