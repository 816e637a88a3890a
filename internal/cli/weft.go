package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weftmesh/weft/internal/cli/core"
)

// WeftCommands lists weft's commands, in the order help shows them.
func WeftCommands() []Command {
	return []Command{
		CertsCommand(),
		CheckCommand(),
		DemoCommand(),
		DevCommand(),
		DiagnosticsCommand(),
		InjectCommand(),
		UninjectCommand(),
		InstallCommand(),
		PolicyCommand(),
		UninstallCommand(),
		AuthzCommand(),
		VizCommand(),
		WeftVersionCommand(),
	}
}

// ControllerCommands lists weft-controller's commands, one per
// control-plane component.
func ControllerCommands() []Command {
	return []Command{
		DestinationControllerCommand(),
		IdentityControllerCommand(),
		InjectorControllerCommand(),
		PolicyControllerCommand(),
		TapControllerCommand(),
		VersionCommand(),
	}
}

// WeftRoot is weft's command tree, with `weft completion
// bash|zsh|fish|powershell`. cmd/weft runs it; hack/gen-cli-docs writes
// docs/cli/ from it.
func WeftRoot() *cobra.Command {
	root := core.Root("weft", "Weft's command-line tool: install, inject, check and observe the mesh", true, WeftCommands()...)
	root.Long = "weft installs the control plane, adds the proxy to workloads, checks and observes the\n" +
		"mesh, and runs a whole mesh on this machine (weft demo, weft dev)."
	return root
}

// WeftMain runs weft with args under a context that SIGINT and SIGTERM
// cancel, and returns the exit status.
func WeftMain(args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return core.Execute(ctx, WeftRoot(), args, stdio)
}
