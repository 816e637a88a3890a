// Command weft-proxy is Weft's sidecar proxy. `weft-proxy run` reads its
// WEFT_PROXY_* settings, connects to the control plane and serves until
// SIGTERM. The wiring lives in internal/cli/proxycmd, which links neither
// client-go nor the CA backends; this file only lists the commands.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
)

func main() {
	os.Exit(core.Main("weft-proxy", proxycmd.Commands(), os.Args[1:], core.StdIO()))
}
