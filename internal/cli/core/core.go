// Package core is the frame shared by every Weft command line: the Command
// type, dispatch under a signal-cancelled context, flag helpers and exit
// statuses. It imports nothing heavy, so a binary links only the commands
// it lists.
package core

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit statuses shared by every command.
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and found a failure (a failed check, a failed case)
	ExitUsage   = 2 // the input or the flags were invalid
)

// IO is what a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// StdIO returns the process's standard streams.
func StdIO() IO { return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr} }

// Command is one subcommand. Run gets the arguments after the command's
// name and returns the process exit status.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdio IO) int
}

// Main dispatches args[0] to the matching command under a context that
// SIGINT and SIGTERM cancel, and returns the exit status.
func Main(prog string, cmds []Command, args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Dispatch(ctx, prog, cmds, args, stdio)
}

// Dispatch is Main without the signal handling, for tests.
func Dispatch(ctx context.Context, prog string, cmds []Command, args []string, stdio IO) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(prog, cmds, stdio.Stderr)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range cmds {
		if c.Name == args[0] {
			return c.Run(ctx, args[1:], stdio)
		}
	}
	fmt.Fprintf(stdio.Stderr, "%s: unknown command %q\n", prog, args[0])
	usage(prog, cmds, stdio.Stderr)
	return ExitUsage
}

func usage(prog string, cmds []Command, w io.Writer) {
	fmt.Fprintf(w, "Usage: %s COMMAND [flags]\n\nCommands:\n", prog)
	sorted := append([]Command(nil), cmds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, c := range sorted {
		fmt.Fprintf(w, "  %-14s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags.\n", prog)
}

// NewFlagSet returns a flag set that reports errors instead of exiting and
// prints its usage to stdio.Stderr.
func NewFlagSet(name string, stdio IO) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	return fs
}

// Parse parses args into fs. It returns (status, false) when the command
// should stop: ExitOK after -h, ExitUsage after a bad flag.
func Parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitUsage, false
	}
	return 0, true
}

// StringList is a repeatable flag (--manifests a --manifests b) that also
// splits comma-separated values.
type StringList []string

func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set appends the comma-separated parts of v.
func (s *StringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}
