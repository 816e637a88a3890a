// Command gen-cli-docs writes the CLI reference, docs/cli/, from the
// command trees of weft, weft-controller, weft-proxy, weft-init and
// weft-policy: one
// Markdown page per command (`make docs-cli`). A test fails when the
// checked-in pages differ from what it would write.
//
//	go run ./hack/gen-cli-docs [DIR]   (default docs/cli)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/policycmd"
	"github.com/weftmesh/weft/internal/cli/proxycmd"
)

func main() {
	dir := "docs/cli"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := generate(dir); err != nil {
		fmt.Fprintf(os.Stderr, "gen-cli-docs: %v\n", err)
		os.Exit(1)
	}
}

// roots are the programs documented, each a command tree.
func roots() []*cobra.Command {
	weft := cli.WeftRoot()
	core.InitCompletion(weft)
	controller := core.Root("weft-controller", "run one control-plane component", false, cli.ControllerCommands()...)
	proxy := core.Root("weft-proxy", "Weft's sidecar proxy", false, proxycmd.Commands()...)
	policy := core.Root("weft-policy", "Weft's offline policy tester (weft policy test|explain and weft authz on their own)", false, policycmd.Commands()...)
	return []*cobra.Command{weft, controller, proxy, proxycmd.InitCommand().Cobra(), policy}
}

// generate replaces the Markdown pages in dir (and only them) with the
// reference of every command, plus an index README.md.
func generate(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	var index strings.Builder
	index.WriteString("# Command-line reference\n\n" +
		"Generated from the command trees by `make docs-cli` (hack/gen-cli-docs); do not edit.\n" +
		"A test fails when these pages are stale.\n\n")
	for _, root := range roots() {
		root.DisableAutoGenTag = true
		setNoAutoGenTag(root)
		if err := doc.GenMarkdownTree(root, dir); err != nil {
			return fmt.Errorf("%s: %w", root.Name(), err)
		}
		fmt.Fprintf(&index, "- [%s](%s.md): %s\n", root.Name(), root.Name(), root.Short)
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), []byte(index.String()), 0o644)
}

func setNoAutoGenTag(c *cobra.Command) {
	c.DisableAutoGenTag = true
	for _, s := range c.Commands() {
		setNoAutoGenTag(s)
	}
}
