package policycmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/cli/policycmd"
	"github.com/weftmesh/weft/internal/testutil"
)

const examples = "../../../examples/policy-ci/"

func run(t *testing.T, prog string, cmds []core.Command, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := core.Dispatch(testutil.Context(t, 0), prog, cmds, args, core.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

// weft-policy's commands are weft's policy commands one level up: the
// same flags, output and exit statuses.
func TestWeftPolicyTestIsWeftPolicyTest(t *testing.T) {
	args := []string{"--manifests", examples + "manifests/base", "--manifests", examples + "manifests/authorizationpolicy", "--cases", examples + "cases.yaml"}
	standalone := []core.Command{policycmd.TestCommand(), policycmd.ExplainCommand(), policycmd.AuthzCommand()}
	code, out, errOut := run(t, "weft-policy", standalone, append([]string{"test"}, args...)...)
	require.Equal(t, core.ExitOK, code, errOut)
	assert.Contains(t, out, "9 passed, 0 failed")

	code2, out2, _ := run(t, "weft", []core.Command{policycmd.PolicyCommand()}, append([]string{"policy", "test"}, args...)...)
	assert.Equal(t, code, code2)
	assert.Equal(t, out, out2)

	code, _, errOut = run(t, "weft-policy", standalone, "test", "--cases", examples+"cases.yaml")
	assert.Equal(t, core.ExitUsage, code)
	assert.Contains(t, errOut, "--manifests PATH is required")
}
