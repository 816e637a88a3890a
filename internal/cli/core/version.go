package core

import (
	"context"
	"fmt"
)

// Version is set at link time (the Makefile passes
// -ldflags "-X github.com/weftmesh/weft/internal/cli/core.Version=$(VERSION)");
// empty in a plain `go build`, when BuildVersion reports "dev".
var Version = ""

// BuildVersion reports the version of the running binary: the one stamped
// at link time, or "dev".
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	return "dev"
}

// VersionCommand prints the binary's version.
func VersionCommand() Command {
	return Command{
		Name:    "version",
		Summary: "print the version stamped into this binary at build time",
		Setup: NoFlags(func(_ context.Context, _ []string, stdio IO) int {
			fmt.Fprintln(stdio.Stdout, BuildVersion())
			return ExitOK
		}),
	}
}
