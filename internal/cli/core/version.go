package core

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Version is set at link time (-ldflags "-X github.com/weftmesh/weft/internal/cli/core.Version=v0.1.0");
// otherwise the module version from the build info is used.
var Version = ""

// BuildVersion reports the version of the running binary.
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// VersionCommand prints the binary's version.
func VersionCommand() Command {
	return Command{
		Name:    "version",
		Summary: "print the version",
		Run: func(_ context.Context, _ []string, stdio IO) int {
			fmt.Fprintln(stdio.Stdout, BuildVersion())
			return ExitOK
		},
	}
}
