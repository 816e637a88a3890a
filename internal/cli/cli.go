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
	"io"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/policycmd"
)

// Command is one node of the command tree; see core.Command.
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

// FlagSet is what a command declares its flags on; see core.FlagSet.
type FlagSet = core.FlagSet

// VersionCommand prints the binary's version (weft-controller's; weft's is
// WeftVersionCommand).
func VersionCommand() Command { return core.VersionCommand() }

// Action is a command's body; see core.Action.
type Action = core.Action

// PolicyCommand is `weft policy` (test, explain); see policycmd.
func PolicyCommand() Command { return policycmd.PolicyCommand() }

// AuthzCommand is `weft authz`; see policycmd.
func AuthzCommand() Command { return policycmd.AuthzCommand() }

// checkOutput accepts an -o/--output value among allowed; see core.CheckOutput.
func checkOutput(output string, allowed ...string) error { return core.CheckOutput(output, allowed...) }

// writeObject prints v as JSON or YAML; see core.WriteObject.
func writeObject(w io.Writer, format string, v any) error { return core.WriteObject(w, format, v) }
