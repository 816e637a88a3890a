// Command weft-proxy is Weft's sidecar proxy. `weft-proxy run` reads its
// WEFT_PROXY_* settings, connects to the control plane and serves until
// SIGTERM. The wiring lives in internal/cli; this file only lists it.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	cmds := []cli.Command{
		cli.ProxyRunCommand(cli.ControlPlaneSources),
		cli.ProxyAwaitCommand(),
		cli.VersionCommand(),
	}
	os.Exit(cli.Main("weft-proxy", cmds, os.Args[1:], cli.StdIO()))
}
