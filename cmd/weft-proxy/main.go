// Command weft-proxy is Weft's sidecar proxy. `weft-proxy run` reads its
// WEFT_PROXY_* settings, connects to the control plane and serves until
// SIGTERM. The wiring lives in internal/cli/proxycmd, which links neither
// client-go nor the CA backends; tracing (internal/cli/proxytrace, the
// OpenTelemetry SDK) is added here, so that this binary alone links it.
// This file only lists the commands.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
	"github.com/weftmesh/weft/internal/cli/proxytrace"
)

func main() {
	cmds := proxycmd.Commands(proxycmd.WithTracing(proxytrace.Start))
	os.Exit(core.Main("weft-proxy", cmds, os.Args[1:], core.StdIO()))
}
