package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftmesh/weft/internal/testutil"
)

// The user documents of issue 29's flow (cluster.md, viz.md, policy.md)
// hold commands in fenced blocks whose info string says which test runs
// them: `sh walkthrough` blocks are run on a real node by the cluster
// suite (test/cluster, its last step checks each was run), `sh demo`
// blocks against `weft demo` by TestVizDocsDemoCommandsRunAgainstTheDemo
// below. A `text` block is a synopsis, not a command.

// userDocs are the documents whose every weft command a test runs.
var userDocs = []string{"../../docs/cluster.md", "../../docs/viz.md", "../../docs/policy.md"}

// docBlock is one fenced block of a document.
type docBlock struct {
	info  string // the info string: "sh walkthrough", "yaml demo", ...
	line  int    // the line of its first content line
	lines []string
}

// fencedBlocks returns the fenced blocks of the document at path.
func fencedBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []docBlock
	var cur *docBlock
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		trimmed := strings.TrimSpace(sc.Text())
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &docBlock{info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: n + 1}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, sc.Text())
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a fenced block is not closed", path)
	return out
}

// docCommandWords returns the words of a `weft` command line without its
// comment, or nil for a line that is no weft command.
func docCommandWords(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "weft ") {
		return nil
	}
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	return strings.Fields(line)
}

func TestEveryWeftCommandOfTheUserDocsIsInABlockATestRuns(t *testing.T) {
	run := map[string]bool{"sh walkthrough": true, "sh demo": true}
	for _, doc := range userDocs {
		n := 0
		for _, b := range fencedBlocks(t, doc) {
			for i, l := range b.lines {
				if docCommandWords(l) == nil || b.info == "text" {
					continue
				}
				n++
				assert.True(t, run[b.info], "%s:%d: %q is in a %q block, which no test runs (make it `sh walkthrough` or `sh demo`, or `text` for a synopsis)", doc, b.line+i, strings.TrimSpace(l), b.info)
			}
		}
		assert.Positive(t, n, "%s has weft commands", doc)
	}
}

// demoLocalDir is the placeholder viz.md uses for the demo's directory.
const demoLocalDir = "/tmp/weft-local-123"

// TestVizDocsDemoCommandsRunAgainstTheDemo runs docs/viz.md's `sh demo`
// blocks as a reader does: `weft demo --dashboard ADDR` (on a free port),
// then each `weft viz` command against the demo's directory, and the
// `yaml demo` ServiceProfile written into the demo's manifests where the
// document applies it. Commands that run until stopped get a bound (tap:
// --max-events, top: --duration); windowed views a shorter window.
func TestVizDocsDemoCommandsRunAgainstTheDemo(t *testing.T) {
	blocks := fencedBlocks(t, "../../docs/viz.md")
	var first []string
	for _, b := range blocks {
		if b.info == "sh demo" {
			for _, l := range b.lines {
				if w := docCommandWords(l); w != nil {
					first = w
					break
				}
			}
			break
		}
	}
	require.NotNil(t, first, "docs/viz.md has a `sh demo` block")
	require.Equal(t, []string{"weft", "demo", "--dashboard"}, first[:3], "the demo commands start by running the demo with its dashboard")

	// The demo, as the document runs it, on a free port.
	args := append([]string(nil), first[2:]...)
	args[1] = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.SyncBuffer
	done := make(chan int, 1)
	go func() { done <- DemoCommand().Run(ctx, args, IO{Stdout: &out, Stderr: &errb}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, ExitOK, code, "weft demo: %s", errb.String())
		case <-time.After(time.Minute):
			t.Error("weft demo did not stop")
		}
	})
	var dir, url string
	eventuallyNil(t, 2*time.Minute, func() error {
		select {
		case code := <-done:
			return fmt.Errorf("weft demo ended with %d: %s", code, errb.String())
		default:
		}
		d := regexp.MustCompile(`files under (\S+)\)`).FindStringSubmatch(out.String())
		u := regexp.MustCompile(`dashboard at (http://\S+)`).FindStringSubmatch(errb.String())
		if d == nil || u == nil {
			return fmt.Errorf("no directory or dashboard yet: %q %q", out.String(), errb.String())
		}
		dir, url = d[1], strings.TrimSuffix(u[1], "/")
		return nil
	}, "weft demo's directory and dashboard")

	// The dashboard: the page, and a frame with the demo's workloads.
	page := httpGet(t, url+"/")
	assert.Contains(t, page, "<html", "the dashboard's page")
	eventuallyNil(t, time.Minute, func() error {
		var f struct {
			Nodes []struct {
				ID string `json:"id"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(httpGet(t, url+"/api/frame")), &f); err != nil {
			return err
		}
		for _, n := range f.Nodes {
			if n.ID == "demo/backend" {
				return nil
			}
		}
		return fmt.Errorf("no demo/backend in %+v", f.Nodes)
	}, "the dashboard's frame shows the demo")

	profileApplied := false
	ran := 0
	for _, b := range blocks {
		switch b.info {
		case "yaml demo":
			// "in a local mesh, a file in DIR/manifests/"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "manifests", "docs-profile.yaml"), []byte(strings.Join(b.lines, "\n")+"\n"), 0o600))
			profileApplied = true
		case "sh demo":
			for _, l := range b.lines {
				w := docCommandWords(l)
				if w == nil || w[1] == "demo" {
					continue
				}
				require.Equal(t, "viz", w[1], "a `sh demo` command is the demo or a viz command: %q", l)
				runDocVizCommand(t, w, dir, profileApplied)
				ran++
			}
		}
	}
	assert.GreaterOrEqual(t, ran, 8, "the viz commands of docs/viz.md's demo blocks")
}

// runDocVizCommand runs one documented `weft viz` command against the
// demo in dir and checks its output shows the demo's traffic.
func runDocVizCommand(t *testing.T, words []string, dir string, profileApplied bool) {
	t.Helper()
	args := make([]string, 0, len(words)+2)
	for _, w := range words[2:] {
		args = append(args, strings.ReplaceAll(w, demoLocalDir, dir))
	}
	require.Contains(t, args, dir, "%v reads the demo's directory", words)
	var want string
	switch sub := words[2]; sub {
	case "stat":
		args, want = append(args, "-t", "2s"), "backend"
	case "edges":
		args, want = append(args, "-t", "2s"), "frontend.demo"
	case "authz":
		args, want = append(args, "-t", "2s"), "backend"
	case "routes":
		args, want = append(args, "-t", "2s"), "[DEFAULT]"
		if profileApplied {
			want = "GET /items"
		}
	case "tap":
		args, want = append(args, "--max-events", "3"), ":path=/items"
	case "top":
		args, want = append(args, "--duration", "2s"), "/items"
	default:
		t.Fatalf("no check for the documented `weft viz %s`", sub)
	}
	// The profile reaches the proxies through the destination service's
	// watch of the manifests: a routes view may need another window.
	eventuallyNil(t, time.Minute, func() error {
		var stdout, stderr testutil.SyncBuffer
		code := VizCommand().Run(testutil.Context(t, time.Minute), args, IO{Stdout: &stdout, Stderr: &stderr})
		if code != ExitOK {
			return fmt.Errorf("exit %d: %s", code, stderr.String())
		}
		if !strings.Contains(stdout.String(), want) {
			return fmt.Errorf("no %q in:\n%s", want, stdout.String())
		}
		return nil
	}, strings.Join(words, " "))
}

// httpGet GETs url from the test and returns the body of a 200 answer.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testutil.Context(t, 30*time.Second), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", url, body)
	return string(body)
}

// eventuallyNil polls check until it returns nil, failing the test with
// what and the last error after d.
func eventuallyNil(t *testing.T, d time.Duration, check func() error, what string) {
	t.Helper()
	var last error
	if !testutil.Poll(testutil.Context(t, d), func() bool {
		last = check()
		return last == nil
	}) {
		t.Fatalf("%s: not within %s: %v", what, d, last)
	}
}
