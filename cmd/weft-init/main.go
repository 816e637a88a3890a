// Command weft-init installs the iptables rules that redirect a pod's TCP
// traffic through its Weft proxy. Its flags and logic live in
// internal/cli/proxycmd and mesh/dataplane/iptables.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
)

func main() {
	os.Exit(core.MainCommand(proxycmd.InitCommand(), os.Args[1:], core.StdIO()))
}
