// Package core is the frame shared by every Weft command line: the Command
// type, which becomes a node of a cobra command tree, dispatch under a
// signal-cancelled context, flag helpers, -o output and exit statuses. It
// imports nothing heavy (cobra, pflag and sigs.k8s.io/yaml), so a binary
// links only the commands it lists.
package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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

// FlagSet is the set a command declares its flags on (pflag's: --long
// flags, -x shorthands).
type FlagSet = pflag.FlagSet

// Action is a command's body. It gets the positional arguments left after
// the flags were parsed and returns the process exit status.
type Action func(ctx context.Context, args []string, stdio IO) int

// Command is one node of a command tree: a leaf with an Action, or a group
// with Sub commands.
type Command struct {
	Name    string
	Summary string
	// Args is the synopsis of what follows the name in the usage line
	// ("[flags] FILE..."); "[flags]" when empty (nothing for a group).
	Args string
	// Long is the help text shown above the flags.
	Long    string
	Example string
	// Setup declares the command's flags on fs when the tree is built, so
	// that --help, completion and the generated reference list them, and
	// returns the Action that runs with the parsed values (nil for a
	// group). It runs once per tree built.
	Setup func(fs *FlagSet) Action
	// Sub are the subcommands of a group.
	Sub []Command
	// ValidArgs completes the first positional argument.
	ValidArgs []string
}

// Run builds the tree rooted at c and executes it with args (the words
// after c's name): flags are parsed, a subcommand chosen and its Action
// run. It returns the exit status.
func (c Command) Run(ctx context.Context, args []string, stdio IO) int {
	return Execute(ctx, c.Cobra(), args, stdio)
}

// Cobra returns the cobra command for c and its subcommands.
func (c Command) Cobra() *cobra.Command {
	use := c.Name
	if c.Args != "" {
		use += " " + c.Args
	} else if c.Setup != nil {
		use += " [flags]"
	}
	cc := &cobra.Command{
		Use:               use,
		Short:             c.Summary,
		Long:              strings.TrimSpace(c.Long),
		Example:           strings.TrimRight(c.Example, "\n"),
		ValidArgs:         c.ValidArgs,
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true,
		// Only a program's root (Root) offers completion.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
	}
	if cc.Long == "" {
		cc.Long = c.Summary
	}
	var action Action
	if c.Setup != nil {
		action = c.Setup(cc.Flags())
	}
	for _, s := range c.Sub {
		cc.AddCommand(s.Cobra())
	}
	if action == nil {
		// A group run without (or with an unknown) subcommand: the usage
		// goes to stderr and the status says the call was wrong.
		action = func(_ context.Context, args []string, stdio IO) int {
			if len(args) > 0 {
				fmt.Fprintf(stdio.Stderr, "%s: unknown subcommand %q (see '%s --help')\n", cc.CommandPath(), args[0], cc.CommandPath())
				return ExitUsage
			}
			cc.SetOut(stdio.Stderr)
			_ = cc.Usage()
			return ExitUsage
		}
		cc.Args = cobra.ArbitraryArgs
	}
	cc.RunE = func(cmd *cobra.Command, args []string) error {
		stdio := IO{Stdin: cmd.InOrStdin(), Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
		if st := action(cmd.Context(), args, stdio); st != ExitOK {
			return exitStatus(st)
		}
		return nil
	}
	return cc
}

// exitStatus is the error a command's RunE returns to carry a non-zero
// status; the command has already said why.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Root returns the tree of a program: prog with cmds under it, the
// default help command and, with completion, `prog completion
// bash|zsh|fish|powershell`.
func Root(prog, summary string, completion bool, cmds ...Command) *cobra.Command {
	root := Command{Name: prog, Summary: summary, Sub: cmds}.Cobra()
	root.CompletionOptions.DisableDefaultCmd = !completion
	return root
}

// Execute runs the tree whose root is root with args under ctx and
// returns the exit status: the Action's, or ExitUsage with one line on
// stderr when the flags or the command were wrong.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdio IO) int {
	if args == nil {
		args = []string{} // cobra reads os.Args for nil
	}
	root.SetArgs(args)
	if stdio.Stdin != nil {
		root.SetIn(stdio.Stdin)
	}
	root.SetOut(stdio.Stdout)
	root.SetErr(stdio.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	InitCompletion(root)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	// Anything else comes from cobra itself: a bad flag, an unknown
	// command, a wrong number of arguments.
	path := root.Name()
	if cmd != nil {
		path = cmd.CommandPath()
	}
	fmt.Fprintf(stdio.Stderr, "%s: %v (see '%s --help')\n", path, err, path)
	return ExitUsage
}

// InitCompletion adds `completion bash|zsh|fish|powershell` to root
// unless root.CompletionOptions.DisableDefaultCmd, writing the scripts to
// root's output as set now. An unknown shell is a usage error (cobra's own
// command would print its help and exit 0).
func InitCompletion(root *cobra.Command) {
	if root.CompletionOptions.DisableDefaultCmd {
		return
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args = cobra.ArbitraryArgs
			c.RunE = func(_ *cobra.Command, args []string) error {
				if len(args) == 0 {
					return errors.New("name a shell: bash, zsh, fish or powershell")
				}
				return fmt.Errorf("unknown shell %q: want bash, zsh, fish or powershell", args[0])
			}
		}
	}
}

// usageError marks a flag error.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// Main runs prog's tree (cmds under it) with args under a context that
// SIGINT and SIGTERM cancel, and returns the exit status.
func Main(prog string, cmds []Command, args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Dispatch(ctx, prog, cmds, args, stdio)
}

// Dispatch is Main without the signal handling, for tests. Completion is
// offered only by the programs people type (weft), see Root.
func Dispatch(ctx context.Context, prog string, cmds []Command, args []string, stdio IO) int {
	return Execute(ctx, Root(prog, "", false, cmds...), args, stdio)
}

// MainCommand runs a program that is one command (weft-init): c is the
// root, args its flags and arguments.
func MainCommand(c Command, args []string, stdio IO) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.Run(ctx, args, stdio)
}

// NoFlags is the Setup of a command that takes no flags.
func NoFlags(a Action) func(*FlagSet) Action {
	return func(*FlagSet) Action { return a }
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

// Type names the flag's value in help.
func (s *StringList) Type() string { return "strings" }
