//go:build clusterintegration

package cluster_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The walkthrough of docs/cluster.md, docs/viz.md and docs/policy.md is
// what this suite runs. Each of those documents has fenced blocks marked
// `sh walkthrough` (GitHub shows them as plain sh); every `weft` command
// in them must be one the suite ran, up to the placeholders (words in
// capitals, such as NS or API_POD, stand for what the reader's cluster
// names) and to flags the suite adds for reading the output (`-o json`,
// windows): the command's words appear, in order, in one the suite ran.
// The policy the walkthrough applies is docs/policy.md's `yaml
// walkthrough` block itself, read by step 3e.

// walkthroughDocs are the documents whose walkthrough the suite runs,
// relative to this package.
var walkthroughDocs = []string{"../../docs/cluster.md", "../../docs/viz.md", "../../docs/policy.md"}

// ran records every weft command the suite ran (its arguments).
var ran struct {
	sync.Mutex
	cmds [][]string
}

func recordRun(args []string) {
	ran.Lock()
	defer ran.Unlock()
	ran.cmds = append(ran.cmds, append([]string(nil), args...))
}

// docCommand is one `weft` command of a walkthrough block.
type docCommand struct {
	where string // file:line
	text  string
	words []string
}

// walkthroughBlocks returns the lines of the fenced blocks of path whose
// info string is lang followed by "walkthrough", with their line numbers.
func walkthroughBlocks(t *testing.T, path, lang string) (lines []string, numbers []int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```"+lang+" walkthrough":
			in = true
		case in && trimmed == "```":
			in = false
		case in:
			lines = append(lines, line)
			numbers = append(numbers, n)
		}
	}
	require.NoError(t, sc.Err())
	require.False(t, in, "%s: a walkthrough block is not closed", path)
	return lines, numbers
}

// walkthroughCommands returns the weft commands of the walkthrough blocks
// of path: each line starting with "weft ", up to a pipe, a redirection
// or a comment.
func walkthroughCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	lines, numbers := walkthroughBlocks(t, path, "sh")
	var out []docCommand
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "weft ") {
			continue
		}
		for _, cut := range []string{" #", " |", " <", " >"} {
			if j := strings.Index(line, cut); j >= 0 {
				line = line[:j]
			}
		}
		out = append(out, docCommand{where: fmt.Sprintf("%s:%d", path, numbers[i]), text: line, words: strings.Fields(line)[1:]})
	}
	return out
}

// placeholder is a word in capitals standing for a name of the reader's.
var placeholder = regexp.MustCompile(`[A-Z][A-Z0-9_]+`)

// wordMatcher turns a documented word into a pattern: placeholders match
// any non-empty text, the rest itself.
func wordMatcher(w string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	last := 0
	for _, loc := range placeholder.FindAllStringIndex(w, -1) {
		b.WriteString(regexp.QuoteMeta(w[last:loc[0]]))
		b.WriteString(".+")
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(w[last:]))
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// runBy reports whether the documented words appear, in order, in args.
func runBy(words, args []string) bool {
	i := 0
	for _, a := range args {
		if i < len(words) && wordMatcher(words[i]).MatchString(a) {
			i++
		}
	}
	return i == len(words)
}

func TestWalkthroughMatching(t *testing.T) {
	assert.True(t, runBy([]string{"viz", "stat", "deploy", "-n", "NS"}, []string{"viz", "stat", "deploy", "-n", "demo-x1", "-o", "json"}))
	assert.True(t, runBy([]string{"diagnostics", "policy", "-n", "NS", "po/API_POD", "8090"}, []string{"diagnostics", "policy", "-n", "demo-x", "po/api-5f-2", "8090", "-o", "json"}))
	assert.False(t, runBy([]string{"viz", "tap", "deploy/web", "-n", "NS"}, []string{"viz", "tap", "deploy/backend", "-n", "app"}))
	assert.False(t, runBy([]string{"viz", "stat", "deploy", "-n", "NS"}, []string{"viz", "stat", "deploy"}))
	assert.False(t, runBy([]string{"check", "--wait", "2m"}, []string{"--wait", "2m", "check"}), "order counts")
}

// walkthroughRan is the last step: every weft command of the three
// documents' walkthroughs was run by the steps before.
func (m *mesh) walkthroughRan(t *testing.T) {
	ran.Lock()
	cmds := append([][]string(nil), ran.cmds...)
	ran.Unlock()
	for _, doc := range walkthroughDocs {
		docCmds := walkthroughCommands(t, doc)
		require.GreaterOrEqual(t, len(docCmds), 2, "%s has a walkthrough of its own", doc)
		for _, dc := range docCmds {
			found := false
			for _, args := range cmds {
				if runBy(dc.words, args) {
					found = true
					break
				}
			}
			assert.True(t, found, "%s: %q was not run by the suite", dc.where, dc.text)
		}
	}
}

// walkthroughPolicy returns the objects of docs/policy.md's `yaml
// walkthrough` block, NAMESPACE replaced by ns.
func walkthroughPolicy(t *testing.T, ns string) []*unstructured.Unstructured {
	t.Helper()
	lines, _ := walkthroughBlocks(t, "../../docs/policy.md", "yaml")
	require.NotEmpty(t, lines, "docs/policy.md has the walkthrough's policy")
	text := strings.ReplaceAll(strings.Join(lines, "\n"), "NAMESPACE", ns)
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var obj map[string]any
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &obj), "docs/policy.md walkthrough policy")
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}
