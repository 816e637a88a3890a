// Package cli holds the command-line front ends of Weft's binaries: flag
// parsing and wiring of mesh/ packages, one file per command. The mains in
// cmd/ only list the commands they offer and call Main. The frame itself
// (Command, Main, flag helpers) lives in package core, the proxy's
// commands in package proxycmd, so that weft-proxy and weft-init link
// neither client-go nor the CA backends, and the offline policy commands
// in package policycmd, for the same reason (cmd/weft-policy).
package cli

import (
	"context"
	"flag"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/policycmd"
)

// Command is one subcommand; see core.Command.
type Command = core.Command

// IO is what a command reads and writes; see core.IO.
type IO = core.IO

// StringList is a repeatable, comma-splitting flag; see core.StringList.
type StringList = core.StringList

// Exit statuses shared by every command.
const (
	ExitOK      = core.ExitOK
	ExitFailure = core.ExitFailure
	ExitUsage   = core.ExitUsage
)

// StdIO returns the process's standard streams.
func StdIO() IO { return core.StdIO() }

// Main dispatches args[0] to the matching command; see core.Main.
func Main(prog string, cmds []Command, args []string, stdio IO) int {
	return core.Main(prog, cmds, args, stdio)
}

// Dispatch is Main without the signal handling, for tests.
func Dispatch(ctx context.Context, prog string, cmds []Command, args []string, stdio IO) int {
	return core.Dispatch(ctx, prog, cmds, args, stdio)
}

// NewFlagSet returns a flag set that reports errors instead of exiting.
func NewFlagSet(name string, stdio IO) *flag.FlagSet { return core.NewFlagSet(name, stdio) }

// Parse parses args into fs; see core.Parse.
func Parse(fs *flag.FlagSet, args []string) (int, bool) { return core.Parse(fs, args) }

// VersionCommand prints the binary's version.
func VersionCommand() Command { return core.VersionCommand() }

// PolicyCommand is `weft policy` (test, explain); see policycmd.
func PolicyCommand() Command { return policycmd.PolicyCommand() }

// AuthzCommand is `weft authz`; see policycmd.
func AuthzCommand() Command { return policycmd.AuthzCommand() }
