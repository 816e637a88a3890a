// Command weft is Weft's command-line tool. Each subcommand lives in
// internal/cli; this file only lists them.
package main

import (
	"os"

	"github.com/weftmesh/weft/internal/cli"
)

func main() {
	cmds := []cli.Command{
		cli.CertsCommand(),
		cli.CheckCommand(),
		cli.DemoCommand(),
		cli.DevCommand(),
		cli.DiagnosticsCommand(),
		cli.InjectCommand(),
		cli.InstallCommand(),
		cli.PolicyCommand(),
		cli.AuthzCommand(),
		cli.VizCommand(),
		cli.VersionCommand(),
	}
	os.Exit(cli.Main("weft", cmds, os.Args[1:], cli.StdIO()))
}
