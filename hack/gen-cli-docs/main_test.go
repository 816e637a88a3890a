package main

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheCheckedInReferenceIsCurrent fails when docs/cli differs from
// what the command trees generate: run `make docs-cli` and commit.
func TestTheCheckedInReferenceIsCurrent(t *testing.T) {
	fresh := t.TempDir()
	require.NoError(t, generate(fresh))
	checkedIn := filepath.Join("..", "..", "docs", "cli")
	want := pages(t, fresh)
	got := pages(t, checkedIn)
	require.Equal(t, names(want), names(got), "the pages of docs/cli are stale: run make docs-cli")
	for name, content := range want {
		assert.Equal(t, content, got[name], "docs/cli/%s is stale: run make docs-cli", name)
	}
}

func TestEveryCommandHasAPage(t *testing.T) {
	fresh := t.TempDir()
	require.NoError(t, generate(fresh))
	p := pages(t, fresh)
	for _, name := range []string{"weft_install.md", "weft_inject.md", "weft_completion_bash.md", "weft_version.md", "weft_viz_stat.md", "weft-controller_policy.md", "weft-proxy_run.md", "weft-init.md",
		"weft_uninstall.md", "weft_uninject.md", "weft-init_validate.md", "weft-policy_test.md", "weft-policy_authz.md"} {
		assert.Contains(t, p, name)
	}
	assert.Contains(t, p["weft_install.md"], "--identity-trust-anchors-file")
	assert.Contains(t, p["weft_install.md"], "--controller-image-pull-policy")
	assert.Contains(t, p["weft_inject.md"], "--proxy-cpu-request")
	assert.Contains(t, p["weft-controller_policy.md"], "--default-opaque-ports")
	assert.Contains(t, p["weft-controller_identity.md"], "--max-connections-per-peer")
}

func pages(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out[filepath.Base(f)] = string(b)
	}
	return out
}

func names(m map[string]string) []string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
