package proxycmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/testutil"
)

// runCommand runs cmd with args and stdin to completion and returns its
// exit status, stdout and stderr.
func runCommand(t *testing.T, cmd core.Command, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cmd.Run(testutil.Context(t, 0), args, core.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}
