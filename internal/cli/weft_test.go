package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"sigs.k8s.io/yaml"

	"github.com/weftmesh/weft/internal/cli"
	"github.com/weftmesh/weft/internal/cli/core"
	"github.com/weftmesh/weft/internal/testutil"
)

// runAsWeft makes this test binary behave as weft when it runs under that
// name with the variable set: the completion scripts call `weft
// __complete ...` through PATH, and a symlink to this binary answers.
const runAsWeft = "WEFT_CLI_TEST_RUN_AS_WEFT"

func TestMain(m *testing.M) {
	if os.Getenv(runAsWeft) == "1" && filepath.Base(os.Args[0]) == "weft" {
		os.Exit(cli.WeftMain(os.Args[1:], cli.StdIO()))
	}
	// Otherwise the tests run, and a goroutine that outlives them fails the
	// run. glog, linked in through step-ca (the smallstep issuer), starts
	// its flush daemon in its package init; it lives as long as the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

// runWeft runs weft's whole tree with args.
func runWeft(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	st := core.Execute(testutil.Context(t, 0), cli.WeftRoot(), args, cli.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	return st, out.String(), errb.String()
}

// bashCompletionLib is the bash-completion package's library, which
// cobra's bash scripts use, as users' shells load it.
const bashCompletionLib = "/usr/share/bash-completion/bash_completion"

// bashComplete sources weft's bash completion script in a real bash and
// returns what completing line (the cursor at its end) offers.
func bashComplete(t *testing.T, line string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err == nil {
		_, err = os.Stat(bashCompletionLib)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bash and the bash-completion package are needed: %v", err)
		}
		t.Skipf("bash and the bash-completion package are needed: %v", err)
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "weft")))
	st, script, errs := runWeft(t, "completion", "bash")
	require.Equal(t, cli.ExitOK, st, errs)
	scriptPath := filepath.Join(dir, "weft.bash")
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o600))

	// The way bash calls a completion function: the words of the line,
	// the index of the one under the cursor, the line and the cursor.
	driver := `source "$3"
source "$1"
read -r -a COMP_WORDS <<< "$2"
[[ "$2" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="$2"
COMP_POINT=${#COMP_LINE}
__start_weft weft "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	ctx, cancel := context.WithTimeout(testutil.Context(t, 0), testutil.DefaultTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", driver, "bash", scriptPath, line, bashCompletionLib)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), runAsWeft+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	return got
}

func TestBashCompletionOffersCommandsFlagsAndValues(t *testing.T) {
	assert.ElementsMatch(t, []string{"inject", "install"}, bashComplete(t, "weft in"), "commands starting with in")
	assert.Equal(t, []string{"stat"}, bashComplete(t, "weft viz st"), "a subcommand of a group")
	assert.Equal(t, []string{"--crds"}, bashComplete(t, "weft install --cr"), "a flag of install")
	assert.Contains(t, bashComplete(t, "weft check --"), "--proxy", "every flag after --")
	assert.Equal(t, []string{"--namespace"}, bashComplete(t, "weft viz stat --namesp"), "a flag shared by the viz commands")
}

func TestEveryShellHasACompletionScript(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		st, out, errs := runWeft(t, "completion", shell)
		require.Equal(t, cli.ExitOK, st, "%s: %s", shell, errs)
		assert.Contains(t, out, "__complete", shell)
	}
	st, _, errs := runWeft(t, "completion", "tcsh")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, errs, "tcsh")
}

func TestABadFlagIsOneLineNamingItWithStatus2(t *testing.T) {
	for _, args := range [][]string{
		{"install", "--no-such-flag"},
		{"install", "-values", "x.yaml"}, // Go's single-dash long flag is not accepted
		{"viz", "stat", "deploy", "--windoww", "1m"},
		{"--no-such-flag"},
	} {
		st, out, errs := runWeft(t, args...)
		assert.Equal(t, cli.ExitUsage, st, "%v", args)
		assert.Empty(t, out, "%v", args)
		lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		require.Len(t, lines, 1, "one line for %v: %q", args, errs)
		assert.Contains(t, lines[0], "flag", "%v", args)
		assert.Contains(t, lines[0], "--help", "%v", args)
	}
	_, _, errs := runWeft(t, "install", "--no-such-flag")
	assert.Equal(t, "weft install: unknown flag: --no-such-flag (see 'weft install --help')\n", errs)
}

func TestUnknownCommandsAndBareGroupsAreUsageErrors(t *testing.T) {
	st, _, errs := runWeft(t, "frobnicate")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, errs, `unknown subcommand "frobnicate"`)
	st, _, errs = runWeft(t, "viz")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Contains(t, errs, "Available Commands")
	st, out, _ := runWeft(t, "viz", "--help")
	assert.Equal(t, cli.ExitOK, st)
	assert.Contains(t, out, "stat")
}

func TestHelpListsDoubleDashFlags(t *testing.T) {
	st, out, _ := runWeft(t, "install", "--help")
	require.Equal(t, cli.ExitOK, st)
	assert.Contains(t, out, "--identity-trust-anchors-file")
	assert.Contains(t, out, "-o, --output")
	assert.NotContains(t, out, "\n  -values")
}

func TestYAMLOutputCarriesTheSameObjectAsJSON(t *testing.T) {
	for name, args := range map[string][]string{
		"policy test": {"policy", "test", "--manifests", policyBase, "--manifests", policyAP, "--cases", policyCase},
		"authz":       {"authz", "deployment/web", "--manifests", policyBase, "--manifests", policySAZ, "-n", "my-app"},
		"install":     {"install", "--crds"},
	} {
		st, js, errs := runWeft(t, append(args, "-o", "json")...)
		require.Equal(t, cli.ExitOK, st, "%s: %s", name, errs)
		st, ym, errs := runWeft(t, append(args, "--output=yaml")...)
		require.Equal(t, cli.ExitOK, st, "%s: %s", name, errs)
		if name == "install" {
			// -o yaml is a stream of documents, -o json one v1 List.
			var list struct {
				Kind  string           `json:"kind"`
				Items []map[string]any `json:"items"`
			}
			require.NoError(t, json.Unmarshal([]byte(js), &list))
			assert.Equal(t, "List", list.Kind)
			assert.Equal(t, strings.Count(ym, "\n---\n")+1, len(list.Items), "one item per YAML document")
			continue
		}
		var fromJSON, fromYAML any
		require.NoError(t, json.Unmarshal([]byte(js), &fromJSON), name)
		require.NoError(t, yaml.Unmarshal([]byte(ym), &fromYAML), name)
		assert.Equal(t, fromJSON, fromYAML, name)
	}
}

// The dashboard reads the proxies only (docs/viz.md): its help does not
// offer --prometheus, and giving it anyway is refused, naming the flag.
func TestVizDashboardDoesNotOfferPrometheusAndRefusesIt(t *testing.T) {
	st, help, errs := runWeft(t, "viz", "dashboard", "--help")
	require.Equal(t, cli.ExitOK, st, errs)
	assert.Contains(t, help, "--addr")
	assert.NotContains(t, help, "prometheus")

	st, out, errs := runWeft(t, "viz", "dashboard", "--prometheus", "http://127.0.0.1:9090", "--addr", "127.0.0.1:0")
	assert.Equal(t, cli.ExitUsage, st)
	assert.Empty(t, out, "nothing served")
	assert.Equal(t, "weft viz dashboard: the dashboard reads the proxies directly; --prometheus is not supported\n", errs)
}
