// Command weft-init installs the iptables rules that redirect a pod's TCP
// traffic through its Weft proxy. Its flags and logic live in
// internal/cli/proxycmd and mesh/dataplane/iptables.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := proxycmd.InitCommand().Run(ctx, os.Args[1:], core.StdIO())
	stop()
	os.Exit(code)
}
